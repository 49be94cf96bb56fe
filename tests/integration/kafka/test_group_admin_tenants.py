"""Groups over Kafka under the control plane: two organisations' groups of the same name are
two groups (each lists, describes and deletes only its own), the console's groups API shows
a group joined over Kafka with its committed offsets, and a DENY on a group refuses its
heartbeat with GROUP_AUTHORIZATION_FAILED."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient

from tests.integration.kafka.cp_kafka import (
    Tenant,
    eventually,
    kafka_control_plane,
    new_tenant,
    service_account_key,
)

T = 30


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-groups"), brokers=1) as cp:
        yield cp


@pytest.fixture(scope="module")
def tenants(cp) -> tuple[Tenant, Tenant]:
    return setup_tenant(cp, "acme"), setup_tenant(cp, "bravo")


def setup_tenant(cp, slug: str) -> Tenant:
    tenant = new_tenant(cp, slug)
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    admin.create_topics([NewTopic("events", 1, 1)], request_timeout=T)["events"].result(T)
    producer = Producer(tenant.confluent(cp.kafka_bootstrap, acks="all"))
    for i in range(2):
        producer.produce("events", f"{slug}-{i}".encode())
    assert producer.flush(T) == 0
    return tenant


def member(cp, tenant: Tenant, key: str | None = None) -> Consumer:
    c = Consumer(
        tenant.confluent(
            cp.kafka_bootstrap,
            key=key,
            **{
                "group.id": "app",
                "group.protocol": "consumer",
                "client.id": f"{tenant.slug}-app",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    c.subscribe(["events"])
    return c


def read(c: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < count:
        assert time.monotonic() < deadline, f"read {len(values)} of {count}"
        m = c.poll(0.2)
        if m is None:
            continue
        assert m.error() is None or m.error().code() != KafkaError._FATAL, m.error()
        if m.error() is None:
            values.append(m.value())
    return values


def listed(cp, tenant: Tenant) -> list[str]:
    admin = KafkaAdminClient(**tenant.kafka_python(cp.kafka_bootstrap))
    try:
        return sorted(g["group_id"] for g in admin.list_groups())
    finally:
        admin.close()


def test_same_named_groups_of_two_tenants_are_two_groups(cp, tenants):
    acme, bravo = tenants
    members = {t.slug: member(cp, t) for t in (acme, bravo)}
    try:
        for t in (acme, bravo):
            assert sorted(read(members[t.slug], 2)) == [f"{t.slug}-{i}".encode() for i in range(2)]
            members[t.slug].commit(asynchronous=False)
        assert listed(cp, acme) == listed(cp, bravo) == ["app"]
        for t in (acme, bravo):
            admin = AdminClient(t.confluent(cp.kafka_bootstrap))
            group = admin.describe_consumer_groups(["app"], request_timeout=T)["app"].result(T)
            assert [m.client_id for m in group.members] == [f"{t.slug}-app"]

        # the console's groups API shows the Kafka group and its offsets, per organisation
        status, groups = cp.api("GET", "groups/", key=acme.key)
        assert status == 200 and [(g["group_id"], g["members"]) for g in groups["results"]] == [
            ("app", 1)
        ]
        status, detail = cp.api("GET", "groups/app/", key=acme.key)
        assert status == 200
        assert [(o["topic"], o["committed_offset"]) for o in detail["offsets"]] == [("events", 2)]

        # bravo deletes its own "app" once its member left; acme's is untouched
        members.pop("bravo").close()
        admin = AdminClient(bravo.confluent(cp.kafka_bootstrap))
        admin.delete_consumer_groups(["app"], request_timeout=T)["app"].result(T)
        assert listed(cp, bravo) == []
        assert listed(cp, acme) == ["app"]
        status, detail = cp.api("GET", "groups/app/", key=acme.key)
        assert status == 200 and len(detail["members"]) == 1
    finally:
        for c in members.values():
            c.close()


def test_a_denied_group_refuses_the_heartbeat(cp, tenants):
    tenant = tenants[0]
    clerk = service_account_key(cp, tenant.key, "clerk", "member")
    deny = AclBinding(
        ResourceType.GROUP,
        "app",
        ResourcePatternType.LITERAL,
        "User:clerk",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    for future in admin.create_acls([deny], request_timeout=T).values():
        future.result(T)

    def refused() -> KafkaError | None:
        c = member(cp, tenant, key=clerk)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() and m.error().code() == KafkaError._FATAL:
                    return m.error()
                if m is not None and m.error() is None:
                    return None  # read a record: not refused (yet)
            return None
        finally:
            c.close()

    error = eventually("the DENY to refuse the clerk's heartbeat", refused, 40)
    assert "Group authorization failed" in error.str()
