"""Classic groups on control-plane brokers: a group id is scoped to the caller's
organisation, so two tenants using the same group id and topic name run two separate
groups (each consumer gets all of its own topic's partitions), and neither can describe or
read the offsets of the other's."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.kafka.cp_kafka import Tenant, eventually, kafka_control_plane, new_tenant

T = 30
PARTITIONS = 4


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-classic-tenants"), brokers=1) as cp:
        yield cp


def tenant_with_topic(cp, slug: str) -> Tenant:
    tenant = new_tenant(cp, slug)
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    for future in admin.create_topics(
        [NewTopic("orders", PARTITIONS, 1)], request_timeout=T
    ).values():
        future.result(T)
    return tenant


def test_same_group_id_in_two_tenants_is_two_groups(cp):
    acme, globex = tenant_with_topic(cp, "acme"), tenant_with_topic(cp, "globex")
    settings = {
        "group.id": "shared",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
    consumers = {
        t.slug: Consumer(t.confluent(cp.kafka_bootstrap, **settings)) for t in (acme, globex)
    }
    try:
        for c in consumers.values():
            c.subscribe(["orders"])

        def both_hold_everything() -> bool:
            for c in consumers.values():
                c.poll(0.05)
            return all(
                {tp.partition for tp in c.assignment()} == set(range(PARTITIONS))
                for c in consumers.values()
            )

        # waits for __consumer_offsets too (the control plane creates it once brokers run)
        eventually("each tenant's consumer to hold all its partitions", both_hold_everything, 60)
        consumers["acme"].commit(offsets=[TopicPartition("orders", 0, 0)], asynchronous=False)
        for tenant in (acme, globex):
            admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
            desc = admin.describe_consumer_groups(["shared"])["shared"].result(timeout=T)
            assert len(desc.members) == 1 and desc.state.name == "STABLE"
        got = consumers["globex"].committed([TopicPartition("orders", 0)], timeout=T)
        assert got[0].offset < 0  # acme's commit is not globex's
        got = consumers["acme"].committed([TopicPartition("orders", 0)], timeout=T)
        assert got[0].offset == 0
    finally:
        for c in consumers.values():
            c.close()
