"""One front door for REST v2 consumer instances: an instance created on one broker is used
through the others (made-up names carry their broker; client-chosen names are looked up)."""

from __future__ import annotations

import time

from harness.cluster import StaticCluster
from tests.integration.groups.conftest import http_json


def read_values(url: str, key: str, want: set[str]) -> set[str]:
    """Values read through the instance at ``url`` until ``want`` were all seen (a group
    member may read some twice while the group settles: at least once)."""
    got: set[str] = set()
    deadline = time.monotonic() + 20
    while not want <= got and time.monotonic() < deadline:
        status, records = http_json("GET", url + "/records?timeout=300", key=key)
        assert status == 200, records
        got |= {r["value"] for r in records}
    return got


def test_an_instance_is_used_through_every_broker(cluster: StaticCluster):
    b1, b2, b3 = (cluster.broker(i) for i in (1, 2, 3))
    key = b1.api_key
    for i in range(6):
        status, doc = http_json(
            "POST",
            f"{b1.url}/v3/clusters/{b1.cluster_id}/topics/far/records",
            {"partition_id": i % 3, "value": {"type": "STRING", "data": f"r{i}"}},
            key=key,
        )
        assert status == 200, doc
    # a made-up name (it names broker 1), then every call through broker 2
    status, inst = http_json(
        "POST",
        f"{b1.url}/consumers/fwd-g",
        {"format": "string", "auto.offset.reset": "earliest", "auto.commit.enable": "false"},
        key=key,
    )
    assert status == 200 and inst["instance_id"].startswith("rest-b1-"), inst
    via2 = f"{b2.url}/consumers/fwd-g/instances/{inst['instance_id']}"
    status, doc = http_json("POST", via2 + "/subscription", {"topics": ["far"]}, key=key)
    assert status == 204, doc
    status, doc = http_json("GET", via2 + "/subscription", key=key)
    assert doc == {"topics": ["far"]}
    want = {f"r{i}" for i in range(6)}
    assert read_values(via2, key, want) == want
    status, doc = http_json("POST", via2 + "/offsets", key=key)
    assert status == 204, doc
    # a client-chosen name on broker 2, used through broker 3 (looked up, then remembered)
    status, named = http_json(
        "POST",
        f"{b2.url}/consumers/fwd-h",
        {"name": "mine", "format": "string", "auto.offset.reset": "earliest"},
        key=key,
    )
    assert status == 200, named
    via3 = f"{b3.url}/consumers/fwd-h/instances/mine"
    status, doc = http_json(
        "POST", via3 + "/assignments", {"partitions": [{"topic": "far", "partition": 1}]}, key=key
    )
    assert status == 204, doc
    status, doc = http_json("GET", via3 + "/assignments", key=key)
    assert doc == {"partitions": [{"topic": "far", "partition": 1}]}
    assert read_values(via3, key, {"r1", "r4"}) == {"r1", "r4"}
    # deleted through another broker; then no broker has it
    for url in (via2, via3):
        status, _ = http_json("DELETE", url, key=key)
        assert status == 204
        status, err = http_json("GET", url + "/subscription", key=key)
        assert status == 404 and err["sluice_code"] == "UNKNOWN_CONSUMER_INSTANCE", err
