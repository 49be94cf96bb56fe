"""kill -9 of every broker at once (the OOM killer, or a crash of the one machine the
single-machine default runs on) with the real control plane and controller: once the brokers
are back, every partition gets a leader by itself (KIP-966's unclean recovery: the longest
log among the last known eligible replicas) and every acknowledged record is still there
(the page cache survives a process crash)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from brokernodes.client.consumer import Consumer
from brokernodes.client.producer import Producer
from tests.faults.cluster import BROKER_IDS, FAULT_ENV, SESSION_TIMEOUT_S, FaultCluster
from tests.integration.control_plane.conftest import start_control_plane, wait_for

PARTITIONS = 3
RECORDS = 600
RECOVERY_TIMEOUT_S = 30.0


@pytest.fixture
def cluster(tmp_path) -> Iterator[FaultCluster]:
    with start_control_plane(tmp_path, FAULT_ENV) as cp:
        yield FaultCluster(cp).start()


def produce_acknowledged(cluster: FaultCluster, topic: str) -> dict[int, dict[int, bytes]]:
    """acks=all records to every partition; per partition, offset -> value acknowledged."""
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    with Producer(",".join(cluster.urls), cluster.api_key, acks="all") as producer:
        sent = [
            (p, value, producer.send(topic, value, partition=p))
            for i in range(RECORDS)
            for p, value in [(i % PARTITIONS, f"r{i}".encode())]
        ]
        producer.flush(60)
        for p, value, future in sent:
            acked[p][future.result(0).offset] = value
    assert sum(len(v) for v in acked.values()) == RECORDS
    return acked


def read_everything(cluster: FaultCluster, topic: str, until: dict[int, int]) -> dict:
    """Every record of every partition up to ``until[p]`` (exclusive), through the leaders."""
    got: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    with Consumer(",".join(cluster.urls), cluster.api_key) as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while any(len(got[p]) < until[p] for p in got) and time.monotonic() < deadline:
            for r in consumer.poll(1.0):
                got[r.partition][r.offset] = r.value or b""
    return got


@pytest.mark.parametrize("fenced_first", [True, False], ids=["fenced-first", "restarted-at-once"])
def test_every_partition_recovers_by_itself_after_kill_9_of_every_broker(
    cluster: FaultCluster, fenced_first: bool
):
    """``fenced-first``: the brokers stay down past their sessions (the controller fences
    them, the partitions go offline with their last ISR members in the ELR);
    ``restarted-at-once``: they are back before their sessions expire (each unclean
    registration takes its broker out of the ISR while the others still look alive)."""
    topic = cluster.create_topic("crash", partitions=PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_isr(topic, 3, partition=p)
    acked = produce_acknowledged(cluster, topic.name)

    for b in BROKER_IDS:  # all at once: no broker has time to notice another's death
        proc = cluster.brokers[b].proc
        assert proc is not None
        proc.kill()
    for b in BROKER_IDS:
        cluster.brokers[b].proc.wait(5)  # type: ignore[union-attr]
    if fenced_first:  # the controller fences them as their sessions expire
        wait_for(
            "every partition offline",
            lambda: all(cluster.leader(topic, p) == -1 for p in range(PARTITIONS)),
            SESSION_TIMEOUT_S * 3 + 10,
        )

    for b in BROKER_IDS:
        cluster.brokers[b].start()
    for b in BROKER_IDS:
        cluster.brokers[b].wait_ready()
    restarted = time.monotonic()
    wait_for(
        "every partition to get a leader by itself",
        lambda: all(cluster.leader(topic, p) >= 0 for p in range(PARTITIONS)),
        RECOVERY_TIMEOUT_S,
    )
    recovered_after = time.monotonic() - restarted
    print(f"every partition led again {recovered_after:.1f} s after the brokers were ready")

    until = {p: max(acked[p]) + 1 for p in range(PARTITIONS)}
    got = read_everything(cluster, topic.name, until)
    for p in range(PARTITIONS):
        missing = sorted(o for o in acked[p] if got[p].get(o) != acked[p][o])
        assert not missing, f"partition {p}: acknowledged records lost at offsets {missing[:20]}"
    if fenced_first:  # each partition's recovery is audited in the topic's organisation
        status, doc = cluster.cp.api(
            "GET", "audit?action=partition.unclean_recovery", key=cluster.api_key
        )
        assert status == 200, doc
        recovered = sorted(e["after"]["partition"] for e in doc["results"])
        assert recovered == list(range(PARTITIONS)), doc


def test_records_acknowledged_under_load_survive_kill_9_of_every_broker(cluster: FaultCluster):
    """The brokers die while acks=all requests are in flight; the producer retries through
    the outage and the recovery. Every record it was told is written (before the crash or
    after) is read back at its acknowledged offset."""
    topic = cluster.create_topic("crash-load", partitions=PARTITIONS)
    for p in range(PARTITIONS):
        cluster.wait_isr(topic, 3, partition=p)
    sent: list[tuple[int, bytes, object]] = []
    stop = threading.Event()
    failures: list[BaseException] = []
    with Producer(
        ",".join(cluster.urls), cluster.api_key, acks="all", enable_idempotence=True
    ) as producer:

        def load() -> None:
            i = 0
            try:
                while not stop.is_set():
                    p, value = i % PARTITIONS, f"l{i}".encode()
                    sent.append((p, value, producer.send(topic.name, value, partition=p)))
                    i += 1
                    time.sleep(0.005)
            except BaseException as e:  # the test fails on it below
                failures.append(e)

        worker = threading.Thread(target=load, name="crash-load")
        worker.start()
        try:
            wait_for("records acknowledged", lambda: sum(f.done() for *_, f in sent) > 200)
            for b in BROKER_IDS:
                cluster.brokers[b].proc.kill()  # type: ignore[union-attr]
            for b in BROKER_IDS:
                cluster.brokers[b].proc.wait(5)  # type: ignore[union-attr]
            wait_for(
                "every partition offline",
                lambda: all(cluster.leader(topic, p) == -1 for p in range(PARTITIONS)),
                SESSION_TIMEOUT_S * 3 + 10,
            )
            for b in BROKER_IDS:
                cluster.brokers[b].start()
            for b in BROKER_IDS:
                cluster.brokers[b].wait_ready()
            wait_for(
                "every partition to get a leader by itself",
                lambda: all(cluster.leader(topic, p) >= 0 for p in range(PARTITIONS)),
                RECOVERY_TIMEOUT_S,
            )
            time.sleep(1.0)  # some load after the recovery too
        finally:
            stop.set()
            worker.join(30)
        assert not failures, failures
        producer.flush(90)
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
    for p, value, future in sent:
        acked[p][future.result(0).offset] = value  # type: ignore[attr-defined]
    assert all(acked[p] for p in range(PARTITIONS))
    got = read_everything(cluster, topic.name, {p: max(acked[p]) + 1 for p in acked})
    for p in range(PARTITIONS):
        missing = sorted(o for o in acked[p] if got[p].get(o) != acked[p][o])
        assert not missing, f"partition {p}: acknowledged records lost at offsets {missing[:20]}"
