"""The LSO and aborted transactions survive a leader failover: three control-plane brokers
replicate a topic; confluent-kafka transactional producers commit one transaction, abort one
and leave one open; the partition's leader is killed (SIGKILL) and the controller elects a
follower. The new leader answers the same last stable offset (ListOffsets read_committed),
its read_committed readers see the committed records only, and once the open transaction
commits through the new leader they see it too, the aborted one never."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.control_plane import FAST_FAILOVER_ENV, start_control_plane
from tests.integration.kafka.cp_kafka import eventually, new_tenant

pytestmark = pytest.mark.slow

T = 60.0
TOPIC = "txnlog-ha"


def read_committed(tenant, bootstrap: str, want: int, settle_s: float = 2.0) -> list[bytes]:
    consumer = Consumer(
        tenant.confluent(
            bootstrap,
            **{
                "group.id": f"txnlog-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + T
        while len(got) < want and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
        end = time.monotonic() + settle_s  # what should not come has its chance
        while time.monotonic() < end:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    return got


def stable_end(tenant, bootstrap: str) -> int:
    """ListOffsets latest with read_committed: the partition leader's LSO."""
    consumer = Consumer(
        tenant.confluent(
            bootstrap, **{"group.id": "txnlog-lso", "isolation.level": "read_committed"}
        )
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def test_lso_and_aborts_survive_a_leader_failover(tmp_path):
    with start_control_plane(tmp_path, env=FAST_FAILOVER_ENV) as cp:
        cp.start_controller("c1")
        cp.wait_controller()
        brokers = {i: cp.start_broker(i, kafka=True) for i in (1, 2, 3)}
        tenant = new_tenant(cp, "txnha")
        status, body = cp.api(
            "POST",
            "topics/",
            {"name": TOPIC, "partitions": 1, "replication_factor": 3},
            key=tenant.key,
        )
        assert status == 201, body
        bootstrap = cp.kafka_bootstrap
        admin = AdminClient(tenant.confluent(bootstrap))

        def leader(other_than: int = -1):
            def check() -> int | None:
                p = admin.list_topics(topic=TOPIC, timeout=10).topics[TOPIC].partitions.get(0)
                ok = p is not None and p.leader not in (-1, other_than) and len(p.isrs) >= 2
                return p.leader if ok else None

            return check

        victim = eventually("the topic's leader", leader(), timeout=30)

        def transactional(name: str) -> Producer:
            p = Producer(
                tenant.confluent(
                    bootstrap,
                    **{
                        "transactional.id": f"txnlog-{name}",
                        "transaction.timeout.ms": 120_000,
                        "acks": "all",
                    },
                )
            )
            p.init_transactions(T)
            return p

        committer, aborter, opener = (transactional(n) for n in ("c", "a", "o"))
        committer.begin_transaction()
        for i in range(5):
            committer.produce(TOPIC, b"c%d" % i, partition=0)
        committer.commit_transaction(T)  # 0-4, marker 5
        aborter.begin_transaction()
        for i in range(5):
            aborter.produce(TOPIC, b"a%d" % i, partition=0)
        aborter.flush(T)
        aborter.abort_transaction(T)  # 6-10, marker 11
        opener.begin_transaction()
        for i in range(3):
            opener.produce(TOPIC, b"o%d" % i, partition=0)
        assert opener.flush(T) == 0  # 12-14, left open
        plain = Producer(tenant.confluent(bootstrap, acks="all"))
        plain.produce(TOPIC, b"p0", partition=0)
        assert plain.flush(T) == 0  # 15
        assert eventually(
            "the LSO at the open transaction", lambda: stable_end(tenant, bootstrap) == 12
        )
        assert read_committed(tenant, bootstrap, 5) == [b"c%d" % i for i in range(5)]

        brokers[victim].kill()
        eventually("a new leader", leader(other_than=victim), timeout=30)
        # the follower that took over has the same LSO: the open transaction still holds
        assert eventually("the new leader's LSO", lambda: stable_end(tenant, bootstrap) == 12)
        assert read_committed(tenant, bootstrap, 5) == [b"c%d" % i for i in range(5)]

        opener.commit_transaction(T)  # its marker goes to the new leader
        values = read_committed(tenant, bootstrap, 9)
        assert values == [b"c%d" % i for i in range(5)] + [b"o0", b"o1", b"o2", b"p0"]
