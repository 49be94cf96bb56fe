"""A follower's log repaired under an in-flight fetch (issue: a repaired replica kept a
permanent gap). The scrubber truncates a follower whose fetch waits in the leader's long
poll; the answer that arrives afterwards was fetched for the old log end and must be
dropped, never appended after the cut. Two real brokers on static metadata (leader 1)."""

from __future__ import annotations

import time

from brokernodes.records.header import HEADER_SIZE
from tests.integration.conftest import BrokerLauncher
from tests.integration.control_plane.conftest import wait_for
from tests.integration.replication.cluster import log_bytes, log_records, start_static_cluster
from tests.integration.replication.test_static import metric, produce

TOPIC = "replicated"


def test_repair_under_an_inflight_fetch_leaves_no_gap(broker_factory: BrokerLauncher):
    c = start_static_cluster(
        broker_factory,
        {TOPIC: (1, {"min.insync.replicas": "1", "segment.bytes": "4096"})},
        n=2,
        leaders={TOPIC: [1]},
        env={"SLUICE_SCRUB_INTERVAL_MS": "200"},
    )
    leader, follower = c.broker(1), c.broker(2)
    sent = 0
    for _ in range(150):
        status, body = produce(leader, f"r{sent:05d}-" + "x" * 40)
        assert status == 200, body
        sent += 1
    dirs = [b.data_dir / f"{TOPIC}-0" for b in (leader, follower)]

    def identical():
        raw = [log_bytes(d) for d in dirs]
        return len(raw[0]) if raw[0] and raw[0] == raw[1] else None

    wait_for("the follower to catch up", identical, 30)
    # The follower now waits in the leader's long poll, fetching from its log end. Flip a
    # byte inside the first batch of its oldest sealed segment: the scrubber cuts the log
    # back to that batch while the fetch is parked.
    segments = sorted(dirs[1].glob("*.log"))
    assert len(segments) > 2, "the follower has too few sealed segments"
    with open(segments[0], "r+b") as f:
        f.seek(HEADER_SIZE + 3)
        byte = f.read(1)
        f.seek(HEADER_SIZE + 3)
        f.write(bytes([byte[0] ^ 0x10]))
    wait_for(
        "the scrubber to repair",
        lambda: metric(follower, "sluice_corrupt_batches_found") >= 1,
        30,
    )
    # New records answer the parked fetch: before the fix they were appended after the cut,
    # leaving offsets 0..N missing on the follower for good.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        status, body = produce(leader, f"r{sent:05d}-late")
        assert status == 200, body
        sent += 1
        time.sleep(0.05)
    wait_for("the follower to re-fetch and match byte for byte", identical, 30)
    offsets = [o for o, _, _ in log_records(dirs[1])]
    assert offsets == list(range(sent)), "the follower's log has a gap"
