"""Transactions under the control plane, through a failover: three brokers, a tenant's
transactional producer (librdkafka) mid-transaction when its transaction coordinator is
killed with SIGKILL. The controller moves the coordinator's ``__transaction_state``
partition (an internal topic the control plane creates); the new leader loads the
transaction and the producer's commit completes through it. read_committed readers see every
record of the transaction once and, for an aborted one after the failover, none. The
tenant's transactional id is scoped to it: FindCoordinator answers for its own qualified id."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.control_plane import FAST_FAILOVER_ENV, start_control_plane
from tests.integration.kafka.cp_kafka import eventually, new_tenant, sasl
from tests.integration.kafka.data_plane_wire import KafkaWire

pytestmark = pytest.mark.slow

T = 60.0
TID = "pay-tx"


def find_coordinator(bootstrap: str, key: str, tid: str) -> int | None:
    user, secret = sasl(key)
    with KafkaWire(bootstrap, user, secret) as wire:
        a = wire.request(apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]})
    (c,) = a["coordinators"]
    return c["node_id"] if c["error_code"] == kerr.NONE else None


def read_committed(bootstrap_conf: dict, expect: int) -> list[bytes]:
    c = Consumer({**bootstrap_conf, "group.id": "pay-reader", "isolation.level": "read_committed"})
    c.assign([TopicPartition("pay", p, 0) for p in range(3)])
    got: list[bytes] = []
    deadline = time.monotonic() + T
    try:
        while time.monotonic() < deadline and len(got) < expect:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
        end = time.monotonic() + 2
        while time.monotonic() < end:  # nothing more may show
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_a_commit_survives_the_coordinators_death(tmp_path):
    env = {
        **FAST_FAILOVER_ENV,
        "SLUICE_BROKER_SESSION_TIMEOUT_S": "4",
        # the internal topics wait for all three brokers, so __transaction_state has three
        # replicas and its partitions can move
        "SLUICE_INTERNAL_TOPICS_GRACE_S": "60",
    }
    with start_control_plane(tmp_path, env=env) as cp:
        cp.start_controller("c1")
        cp.wait_controller()
        brokers = {i: cp.start_broker(i, kafka=True) for i in (1, 2, 3)}
        tenant = new_tenant(cp, "pay")
        status, body = cp.api(
            "POST",
            "topics/",
            {"name": "pay", "partitions": 3, "replication_factor": 3},
            key=tenant.key,
        )
        assert status == 201, body
        bootstrap = cp.kafka_bootstrap
        victim = eventually(
            "a transaction coordinator",
            lambda: find_coordinator(bootstrap, tenant.key, TID),
            timeout=60,
        )
        conf = tenant.confluent(bootstrap)
        p = Producer(
            {
                **conf,
                "transactional.id": TID,
                "transaction.timeout.ms": 120_000,
                "message.timeout.ms": 90_000,
                "reconnect.backoff.max.ms": 500,
            }
        )
        p.init_transactions(T)
        p.begin_transaction()
        for i in range(30):
            p.produce("pay", b"c%03d" % i, partition=i % 3)
        assert p.flush(T) == 0
        brokers[victim].kill()
        alive = next(b.bootstrap for i, b in brokers.items() if i != victim)
        successor = eventually(
            "a new transaction coordinator",
            lambda: (c := find_coordinator(alive, tenant.key, TID)) not in (None, victim) and c,
            timeout=60,
        )
        assert successor != victim
        for i in range(30, 45):
            p.produce("pay", b"c%03d" % i, partition=i % 3)
        p.commit_transaction(T)

        p.begin_transaction()
        for i in range(6):
            p.produce("pay", b"a%03d" % i, partition=i % 3)
        p.abort_transaction(T)

        got = read_committed(conf, 45)
        assert sorted(got) == [b"c%03d" % i for i in range(45)]
