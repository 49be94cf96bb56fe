"""Replication between three real brokers on static metadata (fixed leaders; each leader
commits its own ISR changes): acks=all, the high watermark, ISR shrink and expansion,
NOT_ENOUGH_REPLICAS, the replica fetch and OffsetsForLeaderEpoch routes, metrics."""

from __future__ import annotations

import json
import time

from tests.integration.conftest import BrokerLauncher
from tests.integration.control_plane.conftest import wait_for
from tests.integration.replication.cluster import (
    CLUSTER_SECRET,
    log_records,
    start_static_cluster,
)

TOPIC = "replicated"
RECORDS = f"/v3/clusters/test-cluster/topics/{TOPIC}/records"


def produce(b, value, acks="all"):
    body = {"partition_id": 0, "value": {"type": "STRING", "data": value}}
    return b.json("POST", f"{RECORDS}?acks={acks}", body)


def consume(b, offset=0):
    status, body = b.json(
        "GET", f"/sluice/v1/topics/{TOPIC}/partitions/0/records?offset={offset}&format=text"
    )
    assert status == 200, body
    return [r["value"] for r in body["records"]], body["high_watermark"]


def metric(b, name: str) -> float:
    status, _, raw = b.request(
        "GET", "/metrics", headers={"Authorization": f"Cluster {CLUSTER_SECRET}"}, auth=False
    )
    assert status == 200, raw
    for line in raw.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_acks_all_is_replicated_and_followers_hold_the_same_log(broker_factory: BrokerLauncher):
    c = start_static_cluster(
        broker_factory, {TOPIC: (1, {"min.insync.replicas": "2"})}, leaders={TOPIC: [1]}
    )
    leader = c.broker(1)
    offsets = []
    for i in range(20):
        status, body = produce(leader, f"r{i}")
        assert status == 200, body
        offsets.append(body["offset"])
    assert offsets == list(range(20))
    values, hw = consume(leader)
    assert values == [f"r{i}" for i in range(20)] and hw == 20

    def same():
        logs = [log_records(b.data_dir / f"{TOPIC}-0") for b in c.brokers.values()]
        return logs[0] if len(logs[0]) == 20 and all(x == logs[0] for x in logs) else None

    log = wait_for("followers to hold the leader's log", same)
    assert {epoch for _, epoch, _ in log} == {0}  # the leader epoch is stamped on every batch
    # a follower does not serve clients itself: it forwards to the leader ("One front
    # door"), and a call already forwarded is answered with the leader's name
    status, body = c.broker(2).json(
        "POST",
        RECORDS + "?acks=all",
        {"partition_id": 0, "value": {"type": "STRING", "data": "x"}},
        headers={"Sluice-Forwarded": "3"},
    )
    assert status == 421 and body["sluice_code"] == "NOT_LEADER_OR_FOLLOWER", body
    assert body["leader_id"] == 1
    assert metric(leader, "sluice_under_replicated_partitions") == 0
    assert metric(c.broker(2), "sluice_followed_partitions") == 1


def test_isr_shrinks_hw_freezes_and_acks_all_refused_then_recovers(
    broker_factory: BrokerLauncher,
):
    c = start_static_cluster(
        broker_factory, {TOPIC: (1, {"min.insync.replicas": "2"})}, leaders={TOPIC: [1]}
    )
    leader = c.broker(1)
    assert produce(leader, "before")[0] == 200
    c.broker(2).kill()
    c.broker(3).kill()
    # the produce that waits when the followers vanish is never acknowledged
    started = time.monotonic()
    status, body = produce(leader, "during")
    assert status >= 500 and body["sluice_code"] in (
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
    ), body
    assert time.monotonic() - started < 10
    wait_for("the ISR to shrink", lambda: metric(leader, "sluice_isr_size") == 1)
    status, body = produce(leader, "refused")
    assert status == 503 and body["sluice_code"] == "NOT_ENOUGH_REPLICAS", body
    # acks=1 still appends, but the HW is frozen under min ISR: consumers do not see it
    assert produce(leader, "acks1", acks="1")[0] == 200
    values, hw = consume(leader)
    assert values == ["before"] and hw == 1
    assert metric(leader, "sluice_under_min_isr_partitions") == 1
    assert metric(leader, "sluice_under_replicated_partitions") == 1
    # a follower returns, catches up, rejoins: the HW moves and acks=all works again
    c.broker(2).start()
    wait_for("the ISR to expand", lambda: metric(leader, "sluice_isr_size") == 2)
    status, body = produce(leader, "after")
    assert status == 200, body
    values, hw = consume(leader)
    assert values == ["before", "during", "acks1", "after"] and hw == 4


def test_replica_routes_need_the_cluster_secret_and_fence_stale_epochs(
    broker_factory: BrokerLauncher,
):
    c = start_static_cluster(
        broker_factory, {TOPIC: (1, {"min.insync.replicas": "1"})}, leaders={TOPIC: [1]}
    )
    leader = c.broker(1)
    assert produce(leader, "a")[0] == 200
    fetch = f"/sluice/v1/topics/{TOPIC}/partitions/0/batches?offset=0&replica_id=2"
    # an API key is not a replica
    status, _, body = leader.request("GET", fetch + "&current_leader_epoch=0")
    assert status == 401, body
    cluster = {"Authorization": f"Cluster {CLUSTER_SECRET}"}
    status, headers, body = leader.request(
        "GET", fetch + "&current_leader_epoch=0", headers=cluster, auth=False
    )
    assert status == 200 and body and headers["Sluice-High-Watermark"] == "1"
    status, _, body = leader.request(
        "GET", fetch + "&current_leader_epoch=7", headers=cluster, auth=False
    )
    assert json.loads(body)["error_code"] == "UNKNOWN_LEADER_EPOCH"
    base = f"/internal/v1/replication/topics/{TOPIC}/partitions/0/offsets-for-leader-epoch"
    status, _, body = leader.request(
        "GET",
        base + "?replica_id=2&current_leader_epoch=0&leader_epoch=0",
        headers=cluster,
        auth=False,
    )
    doc = json.loads(body)
    assert status == 200 and doc["error_code"] == "NONE", doc
    assert doc["leader_epoch"] == 0 and doc["end_offset"] == 1
    status, _, body = leader.request(
        "GET", base + "?replica_id=2&current_leader_epoch=0&leader_epoch=0"
    )
    assert status == 401
