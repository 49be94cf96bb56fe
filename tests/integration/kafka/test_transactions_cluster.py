"""Transactions across three brokers (static metadata, leaders spread round-robin): the
coordinator of a transactional id writes its markers to partitions other brokers lead
(through their internal marker route), partition leaders verify transactional batches with a
coordinator on another broker, and the offsets of a group coordinated elsewhere commit with
the transaction. Then the transaction coordinator is killed (SIGKILL) mid-transaction and
restarted: it reloads ``__transaction_state`` and the producer's commit completes, every
record read once by read_committed consumers."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from brokernodes.server.coordinator.offsets_topic import partition_for
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.cluster import StaticCluster, start_static_cluster
from tests.integration.kafka.conftest import confluent_config
from tests.integration.kafka.data_plane_wire import KafkaWire

N = 3
TOPICS = {
    "xo": (N, {}),
    "xi": (N, {}),
    "__consumer_offsets": (N, {"cleanup.policy": "compact"}),
    "__transaction_state": (N, {"cleanup.policy": "compact"}),
}
TIMEOUT_S = 60


@pytest.fixture
def cluster(kafka_launcher) -> StaticCluster:
    return start_static_cluster(kafka_launcher, TOPICS, kafka=True)


def coordinator_of(key: str) -> int:
    """The broker leading the key's partition (leaders are round-robin: partition i on
    broker i + 1)."""
    return partition_for(key, N) + 1


def committed_values(c: StaticCluster, topic: str, tag: bytes, expect: int) -> list[bytes]:
    consumer = Consumer(
        confluent_config(
            c.kafka_bootstrap,
            **{
                "group.id": f"x-reader-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(N)])
    out: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and len(out) < expect:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None and m.value().startswith(tag):
                out.append(m.value())
        end = time.monotonic() + 1.5  # anything beyond what is expected shows now
        while time.monotonic() < end:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None and m.value().startswith(tag):
                out.append(m.value())
    finally:
        consumer.close()
    return out


def test_markers_and_offsets_across_brokers(cluster):
    tag = uuid.uuid4().hex[:6]
    tid, group = f"x-{tag}", f"x-group-{tag}"
    plain = Producer(confluent_config(cluster.kafka_bootstrap, acks="all"))
    for i in range(N):
        plain.produce("xi", f"{tag}-in-{i}".encode(), partition=i)
    assert plain.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        confluent_config(
            cluster.kafka_bootstrap,
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"},
        )
    )
    tps = [TopicPartition("xi", p) for p in range(N)]
    consumer.assign(tps)
    p = Producer(confluent_config(cluster.kafka_bootstrap, **{"transactional.id": tid}))
    p.init_transactions(TIMEOUT_S)

    p.begin_transaction()
    for i in range(N * 2):  # every partition: markers go to all three brokers
        p.produce("xo", f"{tag}-c-{i}".encode(), partition=i % N)
    positions = [TopicPartition("xi", i, 1) for i in range(N)]
    p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
    p.commit_transaction(TIMEOUT_S)

    p.begin_transaction()
    for i in range(N):
        p.produce("xo", f"{tag}-a-{i}".encode(), partition=i)
    later = [TopicPartition("xi", i, 1 + 5) for i in range(N)]
    p.send_offsets_to_transaction(later, consumer.consumer_group_metadata(), TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)

    values = committed_values(cluster, "xo", tag.encode(), N * 2)
    assert sorted(values) == sorted(f"{tag}-c-{i}".encode() for i in range(N * 2))
    committed = consumer.committed(tps, TIMEOUT_S)
    assert {t.partition: t.offset for t in committed} == dict.fromkeys(range(N), 1)
    consumer.close()


def test_the_coordinator_killed_mid_transaction_comes_back_and_commits(cluster):
    tag = uuid.uuid4().hex[:6]
    tid = f"x-kill-{tag}"
    victim = cluster.broker(coordinator_of(tid))
    # partitions the victim does not lead, so the records are durable while it is down
    others = [i for i in range(N) if i + 1 != victim_id(cluster, victim)]
    p = Producer(
        confluent_config(
            cluster.kafka_bootstrap,
            **{"transactional.id": tid, "transaction.timeout.ms": 120_000},
        )
    )
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(10):
        p.produce("xo", f"{tag}-{i}".encode(), partition=others[i % len(others)])
    p.flush(TIMEOUT_S)
    victim.restart(hard=True)  # SIGKILL: the Ongoing state must come back from its log
    victim.wait_ready()
    for i in range(10, 20):
        p.produce("xo", f"{tag}-{i}".encode(), partition=others[i % len(others)])
    p.commit_transaction(TIMEOUT_S)
    values = committed_values(cluster, "xo", tag.encode(), 20)
    assert sorted(values) == sorted(f"{tag}-{i}".encode() for i in range(20))


def victim_id(cluster: StaticCluster, broker) -> int:
    return next(b for b, proc in cluster.brokers.items() if proc is broker)


def test_offsets_pending_across_a_group_coordinator_restart_commit_with_the_transaction(cluster):
    """TxnOffsetCommit, then the group's coordinator is killed and restarted before EndTxn:
    it reloads the offsets as pending from its log, and the commit marker makes them the
    group's."""
    tag = uuid.uuid4().hex[:6]
    tid = f"x-gk-{tag}"
    # a group coordinated by another broker than the transaction coordinator
    group = next(
        f"x-gk-group-{tag}-{i}"
        for i in range(100)
        if coordinator_of(f"x-gk-group-{tag}-{i}") != coordinator_of(tid)
    )
    victim = cluster.broker(coordinator_of(group))
    outside = [i for i in range(N) if i + 1 != coordinator_of(group)]
    consumer = Consumer(
        confluent_config(
            cluster.kafka_bootstrap, **{"group.id": group, "enable.auto.commit": False}
        )
    )
    p = Producer(confluent_config(cluster.kafka_bootstrap, **{"transactional.id": tid}))
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce("xo", f"{tag}-out".encode(), partition=outside[0])
    positions = [TopicPartition("xi", i, 7) for i in range(N)]
    p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
    victim.restart(hard=True)
    victim.wait_ready()
    p.commit_transaction(TIMEOUT_S)
    tps = [TopicPartition("xi", i) for i in range(N)]
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # the restarted coordinator answers once it has loaded
        try:
            got = {t.partition: t.offset for t in consumer.committed(tps, 10)}
        except Exception:
            got = None
        if got == dict.fromkeys(range(N), 7) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert got == dict.fromkeys(range(N), 7)
    consumer.close()
    assert committed_values(cluster, "xo", tag.encode(), 1) == [f"{tag}-out".encode()]


def describe_state(b, tid: str) -> str | None:
    try:
        with KafkaWire(b.bootstrap) as wire:
            a = wire.request(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    except OSError:
        return None
    (s,) = a["transaction_states"]
    return s["transaction_state"] if s["error_code"] == kerr.NONE else None


def test_a_prepared_commit_survives_the_coordinators_death_during_end_txn(cluster):
    """EndTxn is durable once PrepareCommit is written: a partition leader is down so the
    markers cannot all be written, the coordinator is killed in that state and restarted,
    and the reloaded coordinator finishes the commit once the leader is back."""
    tag = uuid.uuid4().hex[:6]
    tid = f"x-end-{tag}"
    coordinator = cluster.broker(coordinator_of(tid))
    down_id = next(b for b in cluster.brokers if b != coordinator_of(tid))
    down = cluster.broker(down_id)
    p = Producer(
        confluent_config(
            cluster.kafka_bootstrap,
            **{"transactional.id": tid, "transaction.timeout.ms": 300_000},
        )
    )
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(N * 3):
        p.produce("xo", f"{tag}-{i}".encode(), partition=i % N)
    assert p.flush(TIMEOUT_S) == 0
    down.kill()
    result: list = []
    ending = threading.Thread(target=lambda: result.append(_commit(p)), name="commit", daemon=True)
    ending.start()
    deadline = time.monotonic() + TIMEOUT_S
    while describe_state(coordinator, tid) != "PrepareCommit":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    coordinator.restart(hard=True)  # SIGKILL while the markers are still being written
    coordinator.wait_ready()
    down.start()
    down.wait_ready()
    deadline = time.monotonic() + TIMEOUT_S
    while describe_state(coordinator, tid) != "CompleteCommit":
        assert time.monotonic() < deadline, describe_state(coordinator, tid)
        time.sleep(0.2)
    ending.join(TIMEOUT_S)
    assert result == [None], result  # the producer's commit succeeded
    values = committed_values(cluster, "xo", tag.encode(), N * 3)
    assert sorted(values) == sorted(f"{tag}-{i}".encode() for i in range(N * 3))


def _commit(p: Producer):
    try:
        p.commit_transaction(TIMEOUT_S * 2)
    except KafkaException as e:
        return e
    return None


def test_internal_transaction_routes_check_their_callers_and_input(cluster):
    """The broker-to-broker marker and verification routes: only the cluster credential, a
    JSON body of the documented shape, and per-marker errors for partitions not led here."""
    from harness.cluster import CLUSTER_SECRET

    b = cluster.broker(1)
    cluster_auth = {"Authorization": f"Cluster {CLUSTER_SECRET}"}
    route = "/internal/v1/transactions/markers"
    status, _, body = b.request("POST", route, {"markers": []})  # an API key is not enough
    assert status == 401 and json.loads(body)["error_code"] == "UNAUTHENTICATED"
    status, _, body = b.request("POST", route, b"{nope", headers=cluster_auth, auth=False)
    assert status == 400 and json.loads(body)["error_code"] == "INVALID_REQUEST"
    status, _, body = b.request(
        "POST", route, {"markers": [{"partition": 0}]}, headers=cluster_auth, auth=False
    )
    assert status == 400 and "log_key" in json.loads(body)["message"]
    marker = {
        "log_key": "xo",
        "partition": 1,  # led by broker 2
        "producer_id": 1,
        "producer_epoch": 0,
        "commit": False,
        "coordinator_epoch": 0,
    }
    status, _, body = b.request(
        "POST", route, {"markers": [marker]}, headers=cluster_auth, auth=False
    )
    assert status == 200
    (result,) = json.loads(body)["results"]
    assert "not led by this broker" in result["message"]
    verify = {
        "transactional_id": "nobody",
        "producer_id": 1,
        "producer_epoch": 0,
        "partitions": [["xo", 0]],
    }
    here = cluster.broker(coordinator_of("nobody"))
    status, _, body = here.request(
        "POST", "/internal/v1/transactions/verify", verify, headers=cluster_auth, auth=False
    )
    assert status == 200 and json.loads(body) == {"errors": ["INVALID_PRODUCER_ID_MAPPING"]}
