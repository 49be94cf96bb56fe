"""Streaming produce and v2 produce sent to a broker that leads none of the partitions: the
records are forwarded to their leaders and answered as if this broker led them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from harness.broker import CLUSTER_ID, BrokerLauncher
from harness.cluster import StaticCluster, start_static_cluster
from tests.integration.broker.util import fetch_json
from tests.integration.rest_proxy.conftest import V2, V2_JSON, ChunkedStream, call

# broker 1 leads none of "far"'s partitions
TOPICS = {"far": (3, {})}
LEADERS = {"far": [2, 3, 2]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StaticCluster]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("rest-front-door"))
    try:
        yield start_static_cluster(launcher, TOPICS, leaders=LEADERS)
    finally:
        launcher.close()


def values(broker, partition: int, offsets: list[int]) -> list[str]:
    """The values at ``offsets``, read through ``broker`` once the high watermark (which
    follows the replicas) has passed them (bounded wait)."""
    deadline = time.monotonic() + 10
    while True:
        status, doc = fetch_json(broker, "far", partition, min(offsets), format="text")
        assert status == 200, doc
        got = {r["offset"]: r["value"] for r in doc["records"]}
        if all(o in got for o in offsets) or time.monotonic() > deadline:
            return [got.get(o) for o in offsets]
        time.sleep(0.05)


def test_streamed_records_for_partitions_led_elsewhere(cluster: StaticCluster):
    front = cluster.broker(1)
    stream = ChunkedStream(front, f"/v3/clusters/{CLUSTER_ID}/topics/far/records")
    try:
        for i in range(6):
            stream.send(
                json.dumps(
                    {"partition_id": i % 3, "value": {"type": "STRING", "data": f"s{i}"}}
                ).encode()
            )
            (answer,) = stream.lines(i + 1)[i:]
            assert answer["error_code"] == 200 and answer["partition_id"] == i % 3, answer
        stream.end()
        answers = stream.finish()
    finally:
        stream.close()
    assert stream.status == 200
    for p in range(3):
        mine = [(a["offset"], f"s{i}") for i, a in enumerate(answers) if i % 3 == p]
        assert values(front, p, [o for o, _ in mine]) == [v for _, v in mine]


def test_v2_produce_for_partitions_led_elsewhere(cluster: StaticCluster):
    front = cluster.broker(1)
    ans = call(
        front,
        "POST",
        "/topics/far",
        {"records": [{"value": {"n": i}, "partition": i % 3} for i in range(6)]},
        content_type=V2_JSON,
        accept=V2,
    )
    assert ans.status == 200, ans
    offsets = ans.json()["offsets"]
    assert [o["partition"] for o in offsets] == [i % 3 for i in range(6)]
    assert all(o["error_code"] is None and isinstance(o["offset"], int) for o in offsets)
    for p in range(3):
        mine = [
            (o["offset"], json.dumps({"n": i}, separators=(",", ":")))
            for i, o in enumerate(offsets)
            if i % 3 == p
        ]
        assert values(front, p, [o for o, _ in mine]) == [v for _, v in mine]
