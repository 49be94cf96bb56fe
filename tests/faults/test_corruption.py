"""Scenario 8: a flipped byte in an old batch of the preferred replica, found and repaired by
the follower scrubber while the load runs, then a preferred leader election onto the
repaired replica and every acknowledged record read through it.

One partition at RF 3, small segments, the scrubber every 300 ms (the fault cluster's
environment), the real controller. The preferred replica is stopped cleanly (leadership
moves), one byte in the middle of an old batch of its oldest segment is flipped, it starts
again as a follower: its scrubber finds the batch, truncates the log there and re-fetches.
A repair that leaves a gap (a fetch in flight during the truncation appended after it) shows
as a hole on that replica and, once it leads, as acknowledged records lost.
"""

from __future__ import annotations

import time
from pathlib import Path

from brokernodes.records.header import LOG_OVERHEAD, peek_batch_size
from tests.faults.cluster import FaultCluster
from tests.faults.conftest import long_run
from tests.faults.history import History
from tests.faults.load import LoadProducer, Reader, drain, read_replicas
from tests.integration.control_plane.conftest import wait_for

PHASE_S = 3.0 if long_run() else 1.0
RATE = 200.0 if long_run() else 100.0


def flip_middle_batch(directory: Path) -> tuple[str, int]:
    """Flip one bit in the middle of the middle batch of the oldest segment (under its
    CRC); returns the segment's name and the byte's position."""
    seg = sorted(directory.glob("*.log"))[0]
    data = seg.read_bytes()
    batches = []
    pos = 0
    while pos < len(data):
        size = peek_batch_size(data, pos)
        if size is None or size < LOG_OVERHEAD or pos + size > len(data):
            break
        batches.append((pos, size))
        pos += size
    assert len(batches) >= 3, f"{seg} holds {len(batches)} batches"
    start, size = batches[len(batches) // 2]
    at = start + size // 2
    with open(seg, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    return seg.name, at


def test_repaired_replica_becomes_leader(cluster: FaultCluster, report) -> None:
    topic = cluster.create_topic("scrubbed", 1, **{"segment.bytes": "8192"})
    history = History("bit-flip-repair-election")
    load = LoadProducer(
        history, cluster.urls, cluster.api_key, topic.name, rate=RATE, prefix="flip"
    ).start()
    reader = Reader(history, cluster.urls, cluster.api_key, topic.name, 1).start()
    preferred = cluster.state(topic)["replicas"][0]
    directory = cluster.partition_dir(preferred, topic)
    wait_for(
        "three segments on the preferred replica",
        lambda: len(list(directory.glob("*.log"))) >= 3,
        60,
    )
    history.fault(f"clean stop of broker {preferred}, a byte flipped")
    cluster.stop(preferred)
    cluster.wait_leader(topic, not_in=(preferred,), timeout=30)
    segment, at = flip_middle_batch(directory)
    cluster.restart(preferred)
    wait_for(
        "the scrubber to find the flipped batch",
        lambda: cluster.metric(preferred, "sluice_corrupt_batches_found") >= 1,
        30,
    )
    cluster.wait_isr(topic, 3, timeout=30)
    time.sleep(PHASE_S)
    history.fault(f"preferred leader election onto broker {preferred}")
    cluster.preferred_election(topic)
    wait_for(f"broker {preferred} to lead", lambda: cluster.leader(topic) == preferred, 30)
    time.sleep(PHASE_S)
    load.stop()
    reader.stop()
    assert cluster.leader(topic) == preferred
    drain(history, cluster.urls, cluster.api_key, topic.name, 1)
    read_replicas(history, cluster.replica_dirs(topic))
    verdict = history.check()
    assert verdict.acknowledged > 0
    report(verdict, flipped=f"{segment}@{at}", repaired_leader=preferred)
