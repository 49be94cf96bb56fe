"""One front door over HTTP: every call goes to broker 1, which leads few or none of the
partitions; it forwards to the leaders and passes their answers back."""

from __future__ import annotations

import json
import time

from brokernodes.records.batch import decode_batches
from brokernodes.records.partitioner import partition_for_key
from harness.broker import CLUSTER_ID, free_port
from harness.cluster import CLUSTER_SECRET, StaticCluster, static_cluster_metadata
from tests.integration.broker.util import BINARY, batch, fetch_binary, fetch_json, produce_binary


def records_path(topic: str, suffix: str = "records") -> str:
    return f"/v3/clusters/{CLUSTER_ID}/topics/{topic}/{suffix}"


def json_values(broker, topic: str, partition: int) -> list[tuple[int, str | None]]:
    """(offset, value) of a partition's records, read as JSON through ``broker``."""
    out: list[tuple[int, str | None]] = []
    offset = 0
    for _ in range(100):
        status, doc = fetch_json(broker, topic, partition, offset, format="text")
        assert status == 200, doc
        out += [(r["offset"], r["value"]) for r in doc["records"]]
        if doc["next_offset"] >= doc["high_watermark"]:
            return out
        offset = doc["next_offset"]
    raise AssertionError("the fetch did not reach the high watermark")


def metrics(broker) -> bytes:
    """The broker's /metrics (the operators' credential: the cluster secret)."""
    status, _, text = broker.request(
        "GET", "/metrics", headers={"Authorization": f"Cluster {CLUSTER_SECRET}"}, auth=False
    )
    assert status == 200, text
    return text


def stored_values(broker, topic: str, partition: int, offsets: list[int]) -> dict:
    """offset -> value, once the high watermark (acks=1: replication) passed ``offsets``."""
    deadline = time.monotonic() + 10
    while True:
        stored = dict(json_values(broker, topic, partition))  # a JSON fetch, forwarded too
        if all(o in stored for o in offsets) or time.monotonic() > deadline:
            return stored
        time.sleep(0.05)


def test_keyed_json_produce_of_255_keys_through_one_broker(cluster: StaticCluster):
    front = cluster.broker(1)
    landed: dict[int, list[tuple[int, str]]] = {}
    for i in range(255):
        key = f"key-{i}"
        status, doc = front.json(
            "POST",
            records_path("keyed"),
            {"key": {"type": "STRING", "data": key}, "value": {"type": "STRING", "data": f"v{i}"}},
        )
        assert status == 200, doc
        assert doc["partition_id"] == partition_for_key(key.encode(), 12), doc
        landed.setdefault(doc["partition_id"], []).append((doc["offset"], f"v{i}"))
    # most of them were forwarded: broker 1 leads 4 of the 12 partitions
    moved = sum(len(v) for p, v in landed.items() if p % 3 != 0)
    assert moved > 100
    text = metrics(front)
    answered = [
        float(line.split()[-1])
        for line in text.decode().splitlines()
        if line.startswith('sluice_forwarded_requests_total{outcome="answered"}')
    ]
    assert answered and answered[0] >= moved
    for p, produced in landed.items():
        stored = stored_values(front, "keyed", p, [o for o, _ in produced])
        assert [stored[o] for o, _ in produced] == [v for _, v in produced]


def test_records_batch_of_mixed_partitions_through_a_non_leader(cluster: StaticCluster):
    front = cluster.broker(1)
    entries = [
        {"id": f"e{i}", "partition_id": i % 3, "value": {"type": "STRING", "data": f"b{i}"}}
        for i in range(30)
    ] + [{"id": "bad", "value": {"type": "NOPE", "data": 1}}]
    status, doc = front.json("POST", records_path("far", "records:batch"), {"entries": entries})
    assert status == 207, doc
    assert [f["id"] for f in doc["failures"]] == ["bad"]
    ok = {s["id"]: s for s in doc["successes"]}
    assert sorted(ok) == sorted(f"e{i}" for i in range(30))
    # entries of one partition are in request order, with consecutive offsets
    for p in range(3):
        mine = [ok[f"e{i}"] for i in range(30) if i % 3 == p]
        assert all(s["partition_id"] == p for s in mine)
        offsets = [s["offset"] for s in mine]
        assert offsets == list(range(offsets[0], offsets[0] + 10))
        stored = stored_values(front, "far", p, offsets)
        assert [stored[o] for o in offsets] == [f"b{i}" for i in range(30) if i % 3 == p]
    # keyless entries may stay on a partition broker 1 leads (sticky), keyed ones move
    keyed = [
        {"id": str(i), "key": {"type": "STRING", "data": f"k{i}"}, "value": {"data": i}}
        for i in range(40)
    ]
    status, doc = front.json("POST", records_path("keyed", "records:batch"), {"entries": keyed})
    assert status == 207 and not doc["failures"], doc
    got = {s["id"]: s["partition_id"] for s in doc["successes"]}
    assert got == {str(i): partition_for_key(f"k{i}".encode(), 12) for i in range(40)}


def test_binary_produce_fetch_and_list_offsets_through_a_non_leader(cluster: StaticCluster):
    front, leader = cluster.broker(1), cluster.broker(3)
    status, answer = produce_binary(front, "far", 1, batch([b"x1", b"x2", b"x3"]), acks="all")
    assert status == 200, answer
    base = answer["base_offset"]
    assert answer["last_offset"] == base + 2 and answer["duplicate"] is False
    status, headers, body = fetch_binary(front, "far", 1, base)
    assert status == 200, body
    assert headers["Content-Type"] == BINARY
    assert int(headers["Sluice-High-Watermark"]) >= base + 3
    assert "Sluice-Next-Offset" in headers and "Sluice-Forwarded" not in headers
    values = [r.value for b in decode_batches(body) for r in b.records if r.offset >= base]
    assert values[:3] == [b"x1", b"x2", b"x3"]
    # the same bytes the leader serves itself
    assert fetch_binary(leader, "far", 1, base)[2] == body
    status, doc = front.json("GET", "/sluice/v1/topics/far/partitions/1/offsets?timestamp=latest")
    assert status == 200 and doc["offset"] >= base + 3, doc
    assert doc == leader.json("GET", "/sluice/v1/topics/far/partitions/1/offsets")[1]
    # a long poll through a non-leader waits on the leader and comes back empty
    started = time.monotonic()
    status, headers, body = fetch_binary(front, "far", 1, doc["offset"], max_wait_ms=300)
    assert status == 200 and body == b"" and time.monotonic() - started >= 0.25
    # errors of the leader pass through as they are
    status, err = front.json("GET", "/sluice/v1/topics/far/partitions/1/records?offset=999999")
    assert status == 416 and err["error_code"] == "OFFSET_OUT_OF_RANGE", err


def test_a_forwarded_request_is_not_forwarded_again(cluster: StaticCluster):
    front = cluster.broker(1)
    status, doc = front.json(
        "GET",
        "/sluice/v1/topics/far/partitions/0/offsets",
        headers={"Sluice-Forwarded": "3"},
    )
    assert status == 421 and doc["error_code"] == "NOT_LEADER_OR_FOLLOWER", doc
    assert doc["leader_id"] == 2


def test_unauthenticated_calls_are_not_forwarded(cluster: StaticCluster):
    front, leader = cluster.broker(1), cluster.broker(2)

    def counts() -> tuple[float, float]:
        """(produce requests the leader served, calls broker 1 forwarded)."""
        served = forwarded = 0.0
        for line in metrics(leader).decode().splitlines():
            if line.startswith("sluice_request_seconds_count") and "produce" in line:
                served += float(line.split()[-1])
        for line in metrics(front).decode().splitlines():
            if line.startswith("sluice_forwarded_requests_total"):
                forwarded += float(line.split()[-1])
        return served, forwarded

    before = counts()
    status, _, data = front.request(
        "POST",
        "/sluice/v1/topics/far/partitions/0/batches",
        batch([b"nope"]),
        headers={"Content-Type": BINARY, "Authorization": "Bearer sk_test.wrong"},
        auth=False,
    )
    assert status == 401, data
    status, _, data = front.request(
        "POST",
        records_path("far"),
        json.dumps({"value": {"data": 1}}).encode(),
        headers={"Content-Type": "application/json"},
        auth=False,
    )
    assert status == 401, data
    assert counts() == before


def test_stale_metadata_on_both_sides_answers_421_without_a_loop(launcher):
    """Broker 1 thinks broker 2 leads ``t``-0, broker 2 thinks broker 1 does: the forwarded
    request is answered 421 by broker 2, never sent back."""
    ports = {1: free_port(), 2: free_port()}
    topics = {"t": (1, {})}
    env = {"SLUICE_CLUSTER_SECRET": CLUSTER_SECRET}
    brokers = {
        b: launcher(
            metadata=static_cluster_metadata(b, ports, topics, leaders={"t": [3 - b]}),
            port=ports[b],
            env=env,
            name=f"stale{b}",
        )
        for b in (1, 2)
    }
    started = time.monotonic()
    status, doc = produce_binary(brokers[1], "t", 0, batch([b"v"]))
    assert status == 421 and doc["error_code"] == "NOT_LEADER_OR_FOLLOWER", doc
    assert doc["leader_id"] == 1  # broker 2's view: it answered, nothing went round again
    status, doc = brokers[1].json("POST", records_path("t"), {"value": {"data": 1}})
    assert status == 421, doc
    assert time.monotonic() - started < 5
