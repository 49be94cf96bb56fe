"""ACLs on the data plane of a control-plane broker: a topic the principal may not DESCRIBE
is left out of Metadata listings and answers TOPIC_AUTHORIZATION_FAILED when named (also to
ListOffsets and OffsetForLeaderEpoch), while the topics it may describe stay visible."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from tests.integration.kafka.cp_kafka import (
    eventually,
    kafka_control_plane,
    new_tenant,
    sasl,
    service_account_key,
)
from tests.integration.kafka.data_plane_wire import KafkaWire

T = 20


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-acls"), brokers=1) as cp:
        yield cp


def test_undescribable_topics_are_hidden_and_refused(cp):
    tenant = new_tenant(cp, "acls")
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    for future in admin.create_topics(
        [NewTopic("shown", 1, 1), NewTopic("hidden", 1, 1)], request_timeout=T
    ).values():
        future.result(T)
    peek = service_account_key(cp, tenant.key, "peek", "member")
    deny = AclBinding(
        ResourceType.TOPIC,
        "hidden",
        ResourcePatternType.LITERAL,
        "User:peek",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([deny], request_timeout=T).values():
        future.result(T)
    peek_admin = AdminClient(tenant.confluent(cp.kafka_bootstrap, key=peek))

    def listed_without_hidden():
        topics = peek_admin.list_topics(timeout=T).topics
        return "shown" in topics and "hidden" not in topics

    eventually("the DENY to reach the broker", listed_without_hidden)
    named = peek_admin.list_topics("hidden", timeout=T).topics["hidden"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the owner still sees both
    assert {"shown", "hidden"} <= set(admin.list_topics(timeout=T).topics)

    user, secret = sasl(peek)
    with KafkaWire(cp.kafka_bootstrap, user, secret) as wire:
        offsets = wire.request(
            apis.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                    for n in ("shown", "hidden")
                ],
            },
        )
        codes = {t["name"]: t["partitions"][0]["error_code"] for t in offsets["topics"]}
        assert codes == {"shown": kerr.NONE, "hidden": kerr.TOPIC_AUTHORIZATION_FAILED}
        epochs = wire.request(
            apis.OFFSET_FOR_LEADER_EPOCH,
            4,
            {"topics": [{"topic": "hidden", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        )
        assert epochs["topics"][0]["partitions"][0]["error_code"] == kerr.TOPIC_AUTHORIZATION_FAILED
