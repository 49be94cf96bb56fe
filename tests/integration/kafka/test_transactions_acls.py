"""Transactional ids under the control plane's ACLs (Kafka's TRANSACTIONAL_ID resource): a
DENY created with Kafka's admin client (CreateAcls, forwarded to the control plane) keeps a
member from using the ids it names, with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a read-only
service account may use none; other ids commit as usual; and two tenants' producers with the
same transactional.id are unrelated (the id is scoped to its organisation)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

T = 30


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-txn-acls"), brokers=1) as cp:
        yield cp


def init_error(key_conf: dict, tid: str) -> str | None:
    p = Producer({**key_conf, "transactional.id": tid})
    try:
        p.init_transactions(T)
    except KafkaException as e:
        return e.args[0].name()
    return None


def commit_one(conf: dict, tid: str, value: bytes) -> None:
    p = Producer({**conf, "transactional.id": tid})
    p.init_transactions(T)
    p.begin_transaction()
    p.produce("ledger", value, partition=0)
    p.commit_transaction(T)


def read_committed(conf: dict) -> list[bytes]:
    group = f"r-{uuid.uuid4().hex[:6]}"
    c = Consumer({**conf, "group.id": group, "isolation.level": "read_committed"})
    c.assign([TopicPartition("ledger", 0, 0)])
    out: list[bytes] = []
    try:
        for _ in range(15):
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def test_transactional_id_acls_and_tenancy(cp):
    tenant = new_tenant(cp, "txacl")
    other = new_tenant(cp, "txacl-other")
    for t in (tenant, other):
        admin = AdminClient(t.confluent(cp.kafka_bootstrap))
        for future in admin.create_topics([NewTopic("ledger", 1, 1)], request_timeout=T).values():
            future.result(T)
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    member = service_account_key(cp, tenant.key, "payer", "member")
    reader = service_account_key(cp, tenant.key, "auditor", "read-only")
    deny = AclBinding(
        ResourceType.TRANSACTIONAL_ID,
        "locked-",
        ResourcePatternType.PREFIXED,
        "User:payer",
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([deny], request_timeout=T).values():
        future.result(T)
    txn_filter = AclBindingFilter(
        ResourceType.TRANSACTIONAL_ID,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = admin.describe_acls(txn_filter, request_timeout=T).result(T)
    assert [(b.name, b.principal) for b in described] == [("locked-", "User:payer")]

    member_conf = tenant.confluent(cp.kafka_bootstrap, key=member)
    eventually(
        "the DENY to reach the broker",
        lambda: init_error(member_conf, "locked-1") == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        timeout=T,
    )
    reader_conf = tenant.confluent(cp.kafka_bootstrap, key=reader)
    assert init_error(reader_conf, "open-1") == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    user, secret = sasl(reader)
    with KafkaWire(cp.kafka_bootstrap, user, secret) as wire:
        found = wire.request(apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["x"]})
        assert found["coordinators"][0]["error_code"] == kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # the same transactional.id in two tenants: two producers that never fence each other
    commit_one(member_conf, "open-1", b"mine")
    other_conf = other.confluent(cp.kafka_bootstrap)
    commit_one(other_conf, "open-1", b"theirs")
    commit_one(member_conf, "open-1", b"mine-again")
    assert read_committed(member_conf) == [b"mine", b"mine-again"]
    assert read_committed(other_conf) == [b"theirs"]
