"""Leader failover under a Kafka producer: three control-plane brokers replicate a topic; an
idempotent acks=all confluent-kafka producer keeps producing while the partition's leader is
killed; the controller elects a new leader from the ISR, the client finds it through
Metadata, and every acknowledged record is read back once, in order."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.control_plane import FAST_FAILOVER_ENV, start_control_plane
from tests.integration.kafka.cp_kafka import eventually, new_tenant

pytestmark = pytest.mark.slow

N = 2000
T = 60.0


def test_acks_all_records_survive_a_leader_failover(tmp_path):
    env = {**FAST_FAILOVER_ENV, "SLUICE_BROKER_SESSION_TIMEOUT_S": "4"}
    with start_control_plane(tmp_path, env=env) as cp:
        cp.start_controller("c1")
        cp.wait_controller()
        brokers = {i: cp.start_broker(i, kafka=True) for i in (1, 2, 3)}
        tenant = new_tenant(cp, "ha")
        status, body = cp.api(
            "POST",
            "topics/",
            {"name": "ha", "partitions": 1, "replication_factor": 3},
            key=tenant.key,
        )
        assert status == 201, body
        admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))

        def leader() -> int | None:
            md = admin.list_topics(topic="ha", timeout=10)
            p = md.topics["ha"].partitions.get(0)
            return p.leader if p is not None and p.leader >= 0 and len(p.isrs) == 3 else None

        victim = eventually("the topic's leader with a full ISR", leader, timeout=30)
        producer = Producer(
            tenant.confluent(
                cp.kafka_bootstrap,
                acks="all",
                **{
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 90_000,
                    "reconnect.backoff.max.ms": 500,
                },
            )
        )
        reports: list = []
        third = threading.Event()

        def send() -> None:
            for i in range(N):
                producer.produce("ha", b"%05d" % i, on_delivery=lambda e, m: reports.append(e))
                if i == N // 3:
                    third.set()
                if i % 20 == 0:
                    producer.poll(0)
                    time.sleep(0.01)  # spread over a few seconds, across the failover

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        assert third.wait(T)
        brokers[victim].kill()
        sender.join(T)
        assert not sender.is_alive()
        assert producer.flush(T) == 0
        assert len(reports) == N
        assert all(e is None for e in reports), [e for e in reports if e is not None][:3]
        new_leader = eventually("a new leader", leader_other_than(admin, victim), timeout=30)
        assert new_leader != victim

        consumer = Consumer(
            tenant.confluent(
                cp.kafka_bootstrap, **{"group.id": "ha-check", "enable.auto.commit": False}
            )
        )
        try:
            consumer.assign([TopicPartition("ha", 0, 0)])
            got: list = []
            deadline = time.monotonic() + T
            while len(got) < N and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
        finally:
            consumer.close()
        assert got == [b"%05d" % i for i in range(N)]


def leader_other_than(admin: AdminClient, victim: int):
    def check() -> int | None:
        md = admin.list_topics(topic="ha", timeout=10)
        p = md.topics["ha"].partitions.get(0)
        return p.leader if p is not None and p.leader not in (-1, victim) else None

    return check
