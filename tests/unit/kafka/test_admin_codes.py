"""The Kafka admin APIs' pure parts and handlers over stand-ins: Kafka's ACL codes <-> Sluice's
ACL model, config entries and alter plans, the control plane's refusals as Kafka's error
codes, and the handlers' forwarding (what reaches the control plane, what the client gets),
including a broker with no control plane."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from brokernodes.security.acl import AclBinding
from brokernodes.server.kafka import acl_codes, config_entries
from brokernodes.server.kafka.context import KafkaContext
from brokernodes.server.kafka.control_plane import Answer, kafka_error
from brokernodes.server.kafka.handlers import admin
from brokernodes.server.metadata.client import ControlPlaneMetadataSource
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.codec import uuid_bytes

# --- ACL codes ---------------------------------------------------------------------------


def creation(**over) -> dict:
    return {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:app",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
        **over,
    }


def a_filter(**over) -> dict:
    return {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
        **over,
    }


def test_a_creation_becomes_the_control_planes_binding():
    assert acl_codes.binding_from_creation(creation()) == {
        "principal": "User:app",
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": "orders",
        "pattern_type": "LITERAL",
        "operation": "READ",
        "permission": "ALLOW",
    }
    prefixed = acl_codes.binding_from_creation(
        creation(resource_type=3, resource_pattern_type=4, operation=2, permission_type=2)
    )
    assert (prefixed["resource_type"], prefixed["pattern_type"]) == ("GROUP", "PREFIXED")
    assert (prefixed["operation"], prefixed["permission"]) == ("ALL", "DENY")


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"resource_type": 6}, "DELEGATION_TOKEN"),
        ({"resource_type": 1}, "resource type"),
        ({"resource_pattern_type": 2}, "pattern type"),  # MATCH is for filters
        ({"operation": 1}, "operation"),
        ({"permission_type": 0}, "permission"),
    ],
)
def test_a_creation_needs_specific_sluice_values(over, words):
    with pytest.raises(acl_codes.AclRequestError, match=words):
        acl_codes.binding_from_creation(creation(**over))


def test_filters_match_as_kafkas_do():
    read = AclBinding(
        principal="User:app", resource_type="TOPIC", resource_name="orders", operation="READ"
    )
    prefix = AclBinding(
        principal="User:app",
        resource_type="TOPIC",
        resource_name="ord",
        pattern_type="PREFIXED",
        operation="WRITE",
        permission="DENY",
    )
    group = AclBinding(
        principal="User:other", resource_type="GROUP", resource_name="g", operation="READ"
    )
    every = acl_codes.filter_of(a_filter())
    assert all(every.matches(b) for b in (read, prefix, group))
    match = acl_codes.filter_of(
        a_filter(resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=2)
    )
    assert match.matches(read) and match.matches(prefix) and not match.matches(group)
    literal = acl_codes.filter_of(
        a_filter(resource_type_filter=2, resource_name_filter="orders", pattern_type_filter=3)
    )
    assert literal.matches(read) and not literal.matches(prefix)
    denies = acl_codes.filter_of(a_filter(permission_type=2, principal_filter="User:app"))
    assert [b for b in (read, prefix, group) if denies.matches(b)] == [prefix]
    # a type Sluice does not have matches nothing; UNKNOWN is invalid
    assert acl_codes.filter_of(a_filter(resource_type_filter=7)) is None
    with pytest.raises(acl_codes.AclRequestError):
        acl_codes.filter_of(a_filter(operation=0))
    with pytest.raises(acl_codes.AclRequestError):
        acl_codes.filter_of(a_filter(resource_type_filter=99))

    resources = acl_codes.describe_resources([read, prefix, group])
    assert [(r["resource_type"], r["resource_name"], r["pattern_type"]) for r in resources] == [
        (2, "orders", 3),
        (2, "ord", 4),
        (3, "g", 3),
    ]
    assert resources[1]["acls"] == [
        {"principal": "User:app", "host": "*", "operation": 4, "permission_type": 2}
    ]
    assert acl_codes.operation_bit("DESCRIBE") == 1 << 8


# --- configs -----------------------------------------------------------------------------

EFFECTIVE = {"cleanup.policy": "delete", "retention.ms": "3600000", "segment.bytes": "1024"}


def test_topic_entries_name_their_source_type_and_synonyms():
    entries = config_entries.topic_entries(
        EFFECTIVE, {"retention.ms": "3600000"}, None, synonyms=True, documentation=True
    )
    by_name = {e["name"]: e for e in entries}
    assert list(by_name) == sorted(EFFECTIVE)
    assert by_name["retention.ms"]["config_source"] == config_entries.SOURCE_TOPIC
    assert by_name["segment.bytes"]["config_source"] == config_entries.SOURCE_DEFAULT
    assert by_name["cleanup.policy"]["config_type"] == config_entries.TYPE_LIST
    assert by_name["retention.ms"]["synonyms"] == [
        {"name": "retention.ms", "value": "3600000", "source": config_entries.SOURCE_TOPIC}
    ]
    assert by_name["retention.ms"]["documentation"]
    assert not any(e["read_only"] or e["is_sensitive"] for e in entries)
    some = config_entries.topic_entries(
        EFFECTIVE, {}, ["segment.bytes", "nope"], synonyms=False, documentation=False
    )
    assert [(e["name"], e["synonyms"], e["documentation"]) for e in some] == [
        ("segment.bytes", [], None)
    ]


def op(name, code, value=None) -> dict:
    return {"name": name, "config_operation": code, "value": value}


def test_incremental_operations_become_a_patch():
    plan = config_entries.incremental_changes(
        EFFECTIVE,
        [
            op("retention.ms", config_entries.OP_SET, "1"),
            op("segment.bytes", config_entries.OP_DELETE),
            op("cleanup.policy", config_entries.OP_APPEND, "compact,delete"),
        ],
    )
    assert plan == {"retention.ms": "1", "segment.bytes": None, "cleanup.policy": "delete,compact"}
    both = {"cleanup.policy": "delete,compact"}
    assert config_entries.incremental_changes(
        both, [op("cleanup.policy", config_entries.OP_SUBTRACT, "delete")]
    ) == {"cleanup.policy": "compact"}
    for bad in (
        [op("retention.ms", config_entries.OP_APPEND, "1")],  # not a list config
        [op("cleanup.policy", config_entries.OP_SUBTRACT, "delete")],  # would be empty
        [op("retention.ms", config_entries.OP_SET)],  # SET without a value
        [op("retention.ms", 9, "1")],
        [op("retention.ms", 0, "1"), op("retention.ms", 1)],  # twice
    ):
        with pytest.raises(config_entries.ConfigOpError):
            config_entries.incremental_changes(EFFECTIVE, bad)


def test_alter_configs_replaces_the_overrides():
    plan = config_entries.replace_changes(
        {"retention.ms": "1", "segment.ms": "2"},
        [{"name": "segment.ms", "value": "3"}, {"name": "flush.ms", "value": None}],
    )
    assert plan == {"retention.ms": None, "segment.ms": "3"}


# --- control-plane refusals --------------------------------------------------------------


def refused(status: int, code: str, fields=None, **headers) -> Answer:
    doc = {"error_code": code, "message": "refused", **({"fields": fields} if fields else {})}
    return Answer(status, doc, headers)


@pytest.mark.parametrize(
    ("answer", "resource", "expected"),
    [
        (refused(409, "TOPIC_ALREADY_EXISTS"), "topic", kerr.TOPIC_ALREADY_EXISTS),
        (refused(400, "INVALID_CONFIG", {"partitions": ["x"]}), "topic", kerr.INVALID_PARTITIONS),
        (
            refused(400, "INVALID_CONFIG", {"replication_factor": ["x"]}),
            "topic",
            kerr.INVALID_REPLICATION_FACTOR,
        ),
        (refused(400, "INVALID_CONFIG", {"name": ["x"]}), "topic", kerr.INVALID_TOPIC_EXCEPTION),
        (refused(400, "INVALID_CONFIG", {"retention.ms": ["x"]}), "topic", kerr.INVALID_CONFIG),
        (refused(400, "INVALID_REQUEST", {"partitions": ["x"]}), "topic", kerr.INVALID_PARTITIONS),
        (refused(400, "QUOTA_EXCEEDED", {"name": ["x"]}), "topic", kerr.POLICY_VIOLATION),
        (refused(403, "PERMISSION_DENIED"), "topic", kerr.TOPIC_AUTHORIZATION_FAILED),
        (refused(403, "PERMISSION_DENIED"), "acl", kerr.CLUSTER_AUTHORIZATION_FAILED),
        (refused(404, "NOT_FOUND"), "topic", kerr.UNKNOWN_TOPIC_OR_PARTITION),
        (refused(400, "INVALID_REQUEST", {"principal": ["x"]}), "acl", kerr.INVALID_REQUEST),
        (refused(500, "INTERNAL_ERROR"), "topic", kerr.UNKNOWN_SERVER_ERROR),
        (Answer(502, None, {}), "topic", kerr.UNKNOWN_SERVER_ERROR),
    ],
)
def test_refusals_become_kafka_codes(answer, resource, expected):
    error = kafka_error(answer, resource)
    assert error.code == expected
    assert (error.message and "refused" in error.message) or answer.doc is None


def test_throttled_carries_the_wait():
    error = kafka_error(refused(429, "THROTTLED", **{"Retry-After": "3"}))
    assert (error.code, error.throttle_ms) == (kerr.THROTTLING_QUOTA_EXCEEDED, 3000)


def test_field_errors_are_in_the_message():
    error = kafka_error(refused(400, "INVALID_CONFIG", {"retention.ms": ["must be an integer"]}))
    assert error.message == "refused - retention.ms: must be an integer"


# --- handlers over stand-ins -------------------------------------------------------------

TOPIC_ID = str(uuid.uuid4())


class FakeControlPlane(ControlPlaneMetadataSource):
    """The control plane's tenant API as canned answers, recording the calls."""

    def __init__(self, answers: dict[tuple[str, str], tuple[int, object]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, object, str]] = []

    async def tenant_request(self, method, path, *, authorization, json_body=None, **kw):
        self.calls.append((method, path, json_body, authorization))
        status, doc = self.answers[(method, path)]
        return status, doc, {}


def context(metadata, topics=None) -> KafkaContext:
    image = SimpleNamespace(topics=topics or {}, brokers={}, broker_id=1, cluster_id="c")
    broker = SimpleNamespace(
        metadata=metadata,
        image=image,
        authorize=lambda header, op, rtype, name, count=True: SimpleNamespace(key_id="slk_k"),
    )
    return KafkaContext(broker, "127.0.0.1", None, auth_header="Bearer slk_k.secret")


def created_topic(partitions: int = 3) -> dict:
    return {
        "topic_id": TOPIC_ID,
        "name": "orders",
        "partitions": partitions,
        "replication_factor": 1,
        "configs": {"retention.ms": "1"},
        "effective_configs": {"retention.ms": "1", "segment.bytes": "1024"},
    }


def create_request(**topic) -> dict:
    return {
        "topics": [
            {
                "name": "orders",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [],
                "configs": [{"name": "retention.ms", "value": "1"}],
                **topic,
            }
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }


HEADER = SimpleNamespace(api_version=7)


def test_create_topics_forwards_with_the_callers_key_and_waits_for_the_image():
    cp = FakeControlPlane({("POST", "topics/"): (201, created_topic())})
    shown = SimpleNamespace(
        topic_id=TOPIC_ID, name="orders", partitions=[SimpleNamespace(leader=1)] * 3
    )
    ctx = context(cp, {"orders": shown})
    answer = asyncio.run(admin.create_topics(ctx, HEADER, create_request()))
    ((method, path, body, authorization),) = cp.calls
    assert (method, path, authorization) == ("POST", "topics/", "Bearer slk_k.secret")
    assert body == {"name": "orders", "configs": {"retention.ms": "1"}, "validate_only": False}
    (result,) = answer["topics"]
    assert result["error_code"] == kerr.NONE and result["topic_id"] == uuid_bytes(TOPIC_ID)
    assert (result["num_partitions"], result["replication_factor"]) == (3, 1)
    sources = {c["name"]: c["config_source"] for c in result["configs"]}
    assert sources == {"retention.ms": 1, "segment.bytes": 5}


def test_create_topics_refusals():
    cp = FakeControlPlane(
        {("POST", "topics/"): (400, {"error_code": "INVALID_CONFIG", "fields": {"partitions": []}})}
    )
    ctx = context(cp)
    answer = asyncio.run(admin.create_topics(ctx, HEADER, create_request(num_partitions=0)))
    assert answer["topics"][0]["error_code"] == kerr.INVALID_PARTITIONS
    assert cp.calls[0][2]["partitions"] == 0
    manual = create_request(assignments=[{"partition_index": 0, "broker_ids": [1]}])
    answer = asyncio.run(admin.create_topics(ctx, HEADER, manual))
    assert answer["topics"][0]["error_code"] == kerr.INVALID_REPLICA_ASSIGNMENT
    twice = create_request()
    twice["topics"] *= 2
    answer = asyncio.run(admin.create_topics(ctx, HEADER, twice))
    assert [t["error_code"] for t in answer["topics"]] == [kerr.INVALID_REQUEST] * 2
    assert len(cp.calls) == 1  # neither reached the control plane


def test_delete_topics_by_id_resolves_the_name():
    cp = FakeControlPlane({("DELETE", "topics/orders"): (204, None)})
    shown = SimpleNamespace(topic_id=TOPIC_ID, name="orders", partitions=[])
    ctx = context(cp, {"orders": shown})
    request = {
        "topics": [
            {"name": None, "topic_id": uuid_bytes(TOPIC_ID)},
            {"name": None, "topic_id": uuid_bytes(str(uuid.uuid4()))},
        ],
        "topic_names": [],
        "timeout_ms": 0,
    }
    answer = asyncio.run(admin.delete_topics(ctx, SimpleNamespace(api_version=6), request))
    first, unknown = answer["responses"]
    assert (first["name"], first["error_code"]) == ("orders", kerr.NONE)
    assert unknown["error_code"] == kerr.UNKNOWN_TOPIC_ID
    assert [c[:2] for c in cp.calls] == [("DELETE", "topics/orders")]


def test_a_broker_without_a_control_plane_refuses_clearly():
    ctx = context(SimpleNamespace())  # a static metadata source
    answer = asyncio.run(admin.create_topics(ctx, HEADER, create_request()))
    (result,) = answer["topics"]
    assert result["error_code"] == kerr.POLICY_VIOLATION
    assert "static metadata" in result["error_message"]
    acls = asyncio.run(admin.describe_acls(ctx, SimpleNamespace(api_version=3), a_filter()))
    assert acls["error_code"] == kerr.SECURITY_DISABLED
