"""Kafka's admin APIs through the control plane, driven by confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient against real brokers registered with a real control plane:
topics, partitions, configs and ACLs are created, described, altered and deleted with the
control plane's validation (Kafka's error codes), and its audit log records each change."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.kafka.cp_kafka import Tenant, eventually, kafka_control_plane, new_tenant

T = 20  # seconds: every client call is bounded


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-admin"), brokers=2) as cp:
        yield cp


@pytest.fixture(scope="module")
def acme(cp) -> Tenant:
    return new_tenant(cp, "acme")


def kafka_code(future) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(T)
    return raised.value.args[0].code()


def audit_actions(cp, tenant: Tenant) -> list[tuple[str, str]]:
    status, body = cp.api("GET", "audit?limit=200", key=tenant.key)
    assert status == 200, body
    return [(e["action"], str(e.get("object_id"))) for e in body["results"]]


def test_confluent_topics_configs_and_partitions(cp, acme):
    admin = AdminClient(acme.confluent(cp.kafka_bootstrap))
    created = admin.create_topics(
        [
            NewTopic("orders", 3, 1, config={"retention.ms": "3600000"}),
            NewTopic("events", 1, 1),
        ],
        operation_timeout=T,
        request_timeout=T,
    )
    for future in created.values():
        assert future.result(T) is None

    # the creating broker's metadata has the topic already: produce at once
    producer = Producer(acme.confluent(cp.kafka_bootstrap, **{"message.timeout.ms": 15000}))
    delivered = []
    producer.produce("orders", b"first", key=b"k", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(T) == 0 and delivered == [None]

    # refusals, each with Kafka's code and the control plane's reason
    again = admin.create_topics([NewTopic("orders", 1, 1)], request_timeout=T)["orders"]
    assert kafka_code(again) == KafkaError.TOPIC_ALREADY_EXISTS
    too_many = admin.create_topics([NewTopic("wide", 1, 7)], request_timeout=T)["wide"]
    assert kafka_code(too_many) == KafkaError.INVALID_REPLICATION_FACTOR
    bad = admin.create_topics(
        [NewTopic("badcfg", 1, 1, config={"retention.ms": "soon"})], request_timeout=T
    )["badcfg"]
    with pytest.raises(KafkaException) as raised:
        bad.result(T)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in raised.value.args[0].str()
    internal = admin.create_topics([NewTopic("__mine", 1, 1)], request_timeout=T)["__mine"]
    assert kafka_code(internal) == KafkaError.TOPIC_EXCEPTION
    dry = admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True, request_timeout=T)
    assert dry["dry"].result(T) is None

    # (the creating broker knew at once; another may learn a moment later)
    topics = eventually(
        "both topics everywhere",
        lambda: (t := admin.list_topics(timeout=T).topics).keys() >= {"orders", "events"} and t,
    )
    assert {"orders", "events"} <= set(topics) and "dry" not in topics
    assert len(topics["orders"].partitions) == 3

    # configs: the override is the topic's own, the rest are defaults
    resource = ConfigResource(ResourceType.TOPIC, "orders")
    configs = admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].is_default and not configs["segment.bytes"].is_read_only

    change = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    assert admin.incremental_alter_configs([change], request_timeout=T)[change].result(T) is None
    configs = admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    assert configs["retention.ms"].value == "7200000"
    assert set(configs["cleanup.policy"].value.split(",")) == {"compact", "delete"}
    unknown = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert kafka_code(admin.incremental_alter_configs([unknown])[unknown]) == (
        KafkaError.INVALID_CONFIG
    )

    # partitions: grow, never shrink
    grown = admin.create_partitions([NewPartitions("orders", 5)], request_timeout=T)
    assert grown["orders"].result(T) is None
    eventually(
        "5 partitions",
        lambda: len(admin.list_topics("orders", timeout=T).topics["orders"].partitions) == 5,
    )
    shrink = admin.create_partitions([NewPartitions("orders", 2)], request_timeout=T)["orders"]
    assert kafka_code(shrink) == KafkaError.INVALID_PARTITIONS

    deleted = admin.delete_topics(["events"], operation_timeout=T, request_timeout=T)
    assert deleted["events"].result(T) is None
    eventually("events gone", lambda: "events" not in admin.list_topics(timeout=T).topics)
    gone = admin.delete_topics(["events"], request_timeout=T)["events"]
    assert kafka_code(gone) == KafkaError.UNKNOWN_TOPIC_OR_PART

    actions = {a for a, _ in audit_actions(cp, acme)}
    assert {
        "topic.create",
        "topic.alter_configs",
        "topic.add_partitions",
        "topic.delete",
    } <= actions


def test_confluent_acls_and_cluster(cp, acme):
    admin = AdminClient(acme.confluent(cp.kafka_bootstrap))
    read = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:reporting",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    deny = AclBinding(
        ResourceType.GROUP,
        "batch-",
        ResourcePatternType.PREFIXED,
        "User:reporting",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([read, deny], request_timeout=T).values():
        assert future.result(T) is None
    # creating an existing binding again succeeds, as in Kafka
    assert admin.create_acls([read], request_timeout=T)[read].result(T) is None
    bad = AclBinding(
        ResourceType.GROUP,
        "g",
        ResourcePatternType.LITERAL,
        "User:reporting",
        "*",
        AclOperation.WRITE,  # not an operation on groups
        AclPermissionType.ALLOW,
    )
    assert kafka_code(admin.create_acls([bad], request_timeout=T)[bad]) == (
        KafkaError.INVALID_REQUEST
    )

    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(everything, request_timeout=T).result(T)
    assert set(found) == {read, deny}
    topic_match = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(topic_match, request_timeout=T).result(T) == [read]

    groups = AclBindingFilter(
        ResourceType.GROUP,
        None,
        ResourcePatternType.ANY,
        "User:reporting",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    removed = admin.delete_acls([groups], request_timeout=T)[groups].result(T)
    assert removed == [deny]
    assert admin.describe_acls(everything, request_timeout=T).result(T) == [read]
    actions = [a for a, _ in audit_actions(cp, acme)]
    assert actions.count("acl.create") == 2 and actions.count("acl.delete") == 1

    # (librdkafka describes the cluster with a Metadata request)
    described = admin.describe_cluster(request_timeout=T).result(T)
    ports = sorted(b.kafka_port for b in cp.brokers)
    assert sorted(n.port for n in described.nodes) == ports
    assert described.controller.id == 1
    assert described.cluster_id


def test_kafka_python_admin(cp, acme):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import TopicAlreadyExistsError

    before = audit_actions(cp, acme)
    admin = KafkaAdminClient(**acme.kafka_python(cp.brokers[1].bootstrap))
    try:
        admin.create_topics(
            {
                "kp": {
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "configs": {"retention.ms": "60000"},
                }
            }
        )
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics({"kp": {"num_partitions": 1}})
        eventually("kp everywhere", lambda: "kp" in admin.list_topics())

        resource = ConfigResource(ConfigResourceType.TOPIC, "kp")
        modified = admin.describe_configs([resource])["topic"]["kp"]
        assert modified["retention.ms"]["value"] == "60000"
        assert set(modified) == {"retention.ms"}  # only the overrides are "modified"

        # incremental (IncrementalAlterConfigs) and the legacy whole-set AlterConfigs
        result = admin.alter_configs([ConfigResource("topic", "kp", {"retention.ms": "120000"})])
        assert result["topic"]["kp"] == "OK"
        result = admin.alter_configs(
            [ConfigResource("topic", "kp", {"segment.ms": "600000"})], incremental=False
        )
        assert result["topic"]["kp"] == "OK"
        modified = admin.describe_configs([resource])["topic"]["kp"]
        # the client sent the other modified config along: both are kept
        assert {k: v["value"] for k, v in modified.items()} == {
            "retention.ms": "120000",
            "segment.ms": "600000",
        }

        admin.create_partitions({"kp": NewPartitions(total_count=4)})
        eventually("4 partitions", lambda: len(admin.describe_topics(["kp"])[0]["partitions"]) == 4)

        acl = ACL(
            principal="User:kp-reader",
            host="*",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(KpResourceType.TOPIC, "kp"),
        )
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found, error = admin.describe_acls(
            ACLFilter(
                principal="User:kp-reader",
                host="*",
                operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(
                    KpResourceType.TOPIC, "kp", ACLResourcePatternType.LITERAL
                ),
            )
        )
        assert error.errno == 0 and len(found) == 1 and found[0].principal == "User:kp-reader"
        deleted = admin.delete_acls(
            [
                ACLFilter(
                    principal=None,
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(
                        KpResourceType.TOPIC, "kp", ACLResourcePatternType.ANY
                    ),
                )
            ]
        )
        ((_, matched, error),) = deleted
        assert error.errno == 0 and len(matched) == 1

        cluster = admin.describe_cluster()  # DescribeCluster v1
        assert {b["broker_id"] for b in cluster["brokers"]} == {1, 2}
        assert {b["port"] for b in cluster["brokers"]} == {b.kafka_port for b in cp.brokers}
        assert cluster["controller_id"] == 1
        # an admin service account's role: describe, idempotent writes; no cluster ALTER
        assert "DESCRIBE" in cluster["authorized_operations"]
        assert "IDEMPOTENT_WRITE" in cluster["authorized_operations"]
        assert "ALTER" not in cluster["authorized_operations"]

        admin.delete_topics(["kp"])
        # the answering broker's metadata shows it at once, the others' a moment later
        eventually("kp gone on every broker", lambda: "kp" not in admin.list_topics())
    finally:
        admin.close()
    after = audit_actions(cp, acme)
    new = [a for a, _ in after[: len(after) - len(before)]]
    for action, times in {
        "topic.create": 1,
        "topic.alter_configs": 2,
        "topic.add_partitions": 1,
        "acl.create": 1,
        "acl.delete": 1,
        "topic.delete": 1,
    }.items():
        assert new.count(action) == times, (action, new)


def test_quotas_are_policy_violations(cp):
    from harness.control_plane import StaffSession

    capped = new_tenant(cp, "capped")
    StaffSession(cp).set_quota("capped", max_partitions=4)
    admin = AdminClient(capped.confluent(cp.kafka_bootstrap))
    assert admin.create_topics([NewTopic("fits", 3, 1)])["fits"].result(T) is None
    over = admin.create_topics([NewTopic("over", 2, 1)], request_timeout=T)["over"]
    with pytest.raises(KafkaException) as raised:
        over.result(T)
    error = raised.value.args[0]
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "at most 4 partitions" in error.str()
    grown = admin.create_partitions([NewPartitions("fits", 6)], request_timeout=T)["fits"]
    assert kafka_code(grown) == KafkaError.POLICY_VIOLATION
    assert "over" not in admin.list_topics(timeout=T).topics
