"""The group handlers over a stand-in context and coordinator (no broker, no sockets): what
they pass the coordinator, and every refusal as Kafka's error code with a message; an
unauthenticated caller is not answered (the connection closes)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from brokernodes.errors import UnauthenticatedError
from brokernodes.groups import (
    ConsumerGroup,
    FencedMemberEpochError,
    HeartbeatResponse,
    OffsetAndMetadata,
    TopicPartition,
)
from brokernodes.groups.offsets import OffsetStore
from brokernodes.server.auth import GroupAuthorizationFailedError, Principal
from brokernodes.server.coordinator.group_coordinator import NotCoordinatorError
from brokernodes.server.kafka.handlers import groups as handlers
from brokernodes.server.metadata.cluster import parse_metadata
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr

ORDERS_ID = uuid.uuid5(uuid.NAMESPACE_URL, "orders")
IMAGE = parse_metadata(
    {
        "cluster_id": "c",
        "broker_id": 1,
        "brokers": [{"id": 1, "url": "http://a"}],
        "topics": [
            {"name": "orders", "topic_id": str(ORDERS_ID), "partitions": 3, "leaders": [1] * 3}
        ],
    }
)


class Coordinator:
    def __init__(self) -> None:
        self.metadata = SimpleNamespace(global_image=lambda: IMAGE)
        self.client_ids: dict = {}
        self.client_hosts: dict = {}
        self.known_ends: dict = {}
        self.calls: list = []
        self.error: Exception | None = None
        self.groups: dict = {}
        self.offsets = OffsetStore()

    async def heartbeat(self, qualified, member_id, member_epoch, **options):
        self.calls.append((qualified, member_id, member_epoch, options))
        if self.error is not None:
            raise self.error
        return HeartbeatResponse(
            member_id or "new", 3, 5000, assignment=frozenset({TopicPartition("orders", 1)})
        )

    async def group(self, qualified):
        if self.error is not None:
            raise self.error
        return self.groups.get(qualified), self.offsets.fetch(qualified)

    def local_groups(self, tenant):
        return sorted(self.groups)


class Context:
    """``KafkaContext``'s surface the handlers use; ``denied`` lists (op, type, name)."""

    def __init__(self, coordinator: Coordinator, denied=(), unauthenticated=False) -> None:
        self.broker = SimpleNamespace(groups=coordinator)
        self.denied = set(denied)
        self.unauthenticated = unauthenticated
        self.client_id = "rdkafka"
        self.peer_host = "127.0.0.1"

    def authorize(self, op, rtype="cluster", name="", count=True):
        if self.unauthenticated:
            raise UnauthenticatedError("revoked")
        if (op, rtype, name) in self.denied:
            raise GroupAuthorizationFailedError(f"may not {op} {rtype} {name}")
        return Principal("User:test", "k", None)


def heartbeat_request(**fields) -> dict:
    codec = apis.request_codec(apis.CONSUMER_GROUP_HEARTBEAT, 1)
    request = codec.decode_all(codec.encode_new({"group_id": "g", "member_epoch": 0}))
    request.update(fields)
    return request


def run(handler, ctx, request):
    return asyncio.run(handler(ctx, None, request))


def test_a_join_is_passed_on_with_names_for_ids_and_answered_by_topic_id():
    coordinator = Coordinator()
    ctx = Context(coordinator)
    request = heartbeat_request(
        member_id="m-1",
        subscribed_topic_names=["orders"],
        server_assignor="range",
        rebalance_timeout_ms=30000,
        topic_partitions=[{"topic_id": ORDERS_ID.bytes, "partitions": [1]}],
    )
    answer = run(handlers.consumer_group_heartbeat, ctx, request)
    ((qualified, member_id, epoch, options),) = coordinator.calls
    assert (qualified, member_id, epoch) == ("g", "m-1", 0)
    assert options["subscriptions"] == ["orders"] and options["assignor"] == "range"
    assert options["owned"] == [TopicPartition("orders", 1)]
    assert options["rebalance_timeout_ms"] == 30000
    assert answer["error_code"] == 0 and answer["member_id"] == "m-1"
    assert answer["assignment"] == {
        "topic_partitions": [{"topic_id": ORDERS_ID.bytes, "partitions": [1]}]
    }
    assert coordinator.client_ids[("g", "m-1")] == "rdkafka"


def test_unchanged_fields_stay_unchanged():
    coordinator = Coordinator()
    # librdkafka sends an empty regex for "none"
    request = heartbeat_request(member_epoch=3, subscribed_topic_regex="")
    answer = run(handlers.consumer_group_heartbeat, Context(coordinator), request)
    assert answer["error_code"] == 0
    ((_, member_id, _, options),) = coordinator.calls
    assert member_id is None  # "" is no member id: the coordinator makes one
    assert options["subscriptions"] is None and options["owned"] is None
    assert options["rebalance_timeout_ms"] is None and options["assignor"] is None


@pytest.mark.parametrize(
    "request_fields, denied, code",
    [
        ({"server_assignor": "magic"}, (), kerr.UNSUPPORTED_ASSIGNOR),
        ({"subscribed_topic_regex": "^ord.*"}, (), kerr.INVALID_REQUEST),
        ({"group_id": ""}, (), kerr.INVALID_REQUEST),
        ({"group_id": "g" * 250}, (), kerr.INVALID_GROUP_ID),
        ({"member_id": "m" * 1025}, (), kerr.INVALID_REQUEST),
        ({}, [("READ", "group", "g")], kerr.GROUP_AUTHORIZATION_FAILED),
        ({"subscribed_topic_names": ["orders"]}, [("READ", "topic", "orders")], None),
    ],
)
def test_heartbeat_refusals_are_kafka_codes_with_messages(request_fields, denied, code):
    coordinator = Coordinator()
    answer = run(
        handlers.consumer_group_heartbeat,
        Context(coordinator, denied),
        heartbeat_request(**request_fields),
    )
    assert answer["error_code"] == (code or kerr.GROUP_AUTHORIZATION_FAILED)
    assert answer["error_message"]
    assert coordinator.calls == []  # refused before the coordinator is asked


@pytest.mark.parametrize(
    "error, code",
    [
        (FencedMemberEpochError("stale"), kerr.FENCED_MEMBER_EPOCH),
        (NotCoordinatorError("elsewhere", 2, "http://b"), kerr.NOT_COORDINATOR),
    ],
)
def test_coordinator_errors_are_answered(error, code):
    coordinator = Coordinator()
    coordinator.error = error
    answer = run(handlers.consumer_group_heartbeat, Context(coordinator), heartbeat_request())
    assert answer["error_code"] == code and answer["error_message"] == error.message


def test_an_unauthenticated_caller_is_not_answered():
    ctx = Context(Coordinator(), unauthenticated=True)
    with pytest.raises(UnauthenticatedError):
        run(handlers.consumer_group_heartbeat, ctx, heartbeat_request())
    with pytest.raises(UnauthenticatedError):
        run(handlers.list_groups, ctx, {"states_filter": [], "types_filter": []})


def test_describe_answers_each_group_on_its_own():
    coordinator = Coordinator()
    group = ConsumerGroup("g", partition_counts={"orders": 3}, member_id_factory=lambda: "m")
    group.heartbeat(None, 0, 0, subscriptions=["orders"])
    coordinator.groups["g"] = group
    coordinator.offsets.commit("only-offsets", {TopicPartition("orders", 0): OffsetAndMetadata(1)})
    ctx = Context(coordinator, denied=[("DESCRIBE", "group", "secret"), ("DELETE", "group", "g")])
    request = {
        "group_ids": ["g", "only-offsets", "secret", ""],
        "include_authorized_operations": True,
    }
    answer = run(handlers.consumer_group_describe, ctx, request)
    g, offsets_only, secret, empty = answer["groups"]
    assert g["error_code"] == 0 and g["group_state"] == "Stable"
    assert [m["member_id"] for m in g["members"]] == ["m"]
    assert g["authorized_operations"] == (1 << 3) | (1 << 8)  # READ, DESCRIBE; not DELETE
    assert offsets_only["error_code"] == kerr.GROUP_ID_NOT_FOUND  # clients ask DescribeGroups
    assert secret["error_code"] == kerr.GROUP_AUTHORIZATION_FAILED
    assert empty["error_code"] == kerr.INVALID_GROUP_ID
    assert apis.response_codec(apis.CONSUMER_GROUP_DESCRIBE, 0).encode_new(answer)


def test_list_shows_only_groups_the_caller_may_describe():
    coordinator = Coordinator()
    coordinator.groups = {"mine": ConsumerGroup("mine"), "theirs": ConsumerGroup("theirs")}
    ctx = Context(coordinator, denied=[("DESCRIBE", "group", "theirs")])
    answer = run(handlers.list_groups, ctx, {"states_filter": [], "types_filter": []})
    assert answer["error_code"] == 0
    assert [g["group_id"] for g in answer["groups"]] == ["mine"]
