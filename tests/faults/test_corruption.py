"""Scenario 8: one flipped bit in a sealed segment of a follower is detected (the follower
scrubber verifies CRCs), never served, and re-fetched from the leader until the replicas are
byte-identical again. Static metadata (fixed leader, broker 1)."""

from __future__ import annotations

import time

from brokernodes.records.header import HEADER_SIZE
from tests.faults.conftest import long_run
from tests.faults.history import History
from tests.faults.load import LoadProducer, drain
from tests.integration.conftest import API_KEY, BrokerLauncher
from tests.integration.control_plane.conftest import wait_for
from tests.integration.replication.cluster import (
    CLUSTER_SECRET,
    log_bytes,
    log_records,
    start_static_cluster,
)

TOPIC = "scrubbed"


def metric(b, name: str) -> float:
    status, _, raw = b.request(
        "GET", "/metrics", headers={"Authorization": f"Cluster {CLUSTER_SECRET}"}, auth=False
    )
    assert status == 200, raw
    for line in raw.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_flipped_bit_in_a_follower_segment_is_refetched(broker_factory: BrokerLauncher, report):
    c = start_static_cluster(
        broker_factory,
        {TOPIC: (1, {"min.insync.replicas": "2", "segment.bytes": "8192"})},
        leaders={TOPIC: [1]},
        env={"SLUICE_SCRUB_INTERVAL_MS": "300"},
    )
    urls = [c.broker(1).url]
    history = History("bit-flip")
    load = LoadProducer(history, urls, API_KEY, TOPIC, rate=200, prefix="flip").start()
    time.sleep(6.0 if long_run() else 3.0)
    load.stop()
    dirs = {b: c.broker(b).data_dir / f"{TOPIC}-0" for b in (1, 2, 3)}

    def identical():
        raw = [log_bytes(d) for d in dirs.values()]
        return len(raw[0]) if raw[0] and all(r == raw[0] for r in raw) else None

    wait_for("replicas to converge", identical, 30)
    follower = dirs[2]
    sealed = sorted(follower.glob("*.log"))[0]
    assert len(list(follower.glob("*.log"))) > 1, "the follower has no sealed segment"
    at = HEADER_SIZE + 3  # inside the first batch's records, under its CRC
    with open(sealed, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    assert identical() is None
    wait_for(
        "the scrubber to find it",
        lambda: metric(c.broker(2), "sluice_corrupt_batches_found") >= 1,
        30,
    )
    # a follower serves no consumer: the corrupt copy is never read by a client
    status, body = c.broker(2).json(
        "GET", f"/sluice/v1/topics/{TOPIC}/partitions/0/records?offset=0"
    )
    assert status == 421, body
    n = wait_for("the follower to re-fetch and match byte for byte", identical, 30)
    drain(history, urls, API_KEY, TOPIC, 1)
    verdict = history.check()
    assert len(log_records(follower)) == verdict.acknowledged
    report(verdict, corrupt_batches_found=1, identical_bytes=n)
