"""Confluent REST Proxy v2 consumer instances and the stateless cursor API on real brokers."""

from __future__ import annotations

import base64
import time

from tests.integration.groups.conftest import GROUP_TOPICS, http_json, start_cluster


def produce(b, key, topic, partition, value, headers=None):
    body = {"partition_id": partition, "value": {"type": "STRING", "data": value}}
    if headers:
        body["headers"] = headers
    s, r = http_json(
        "POST", f"{b.url}/v3/clusters/test-cluster/topics/{topic}/records", body, key=key
    )
    assert s == 200, r
    return r


def test_v2_consumer_instance_flow(gbroker):
    b, key = gbroker, gbroker.api_key
    for i in range(6):
        produce(b, key, "orders", i % 3, f"r{i}", [{"name": "h", "value": "aGk="}])
    s, inst = http_json(
        "POST",
        f"{b.url}/consumers/rest-g",
        {
            "name": "c1",
            "format": "string",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        key=key,
    )
    assert s == 200 and inst["instance_id"] == "c1", inst
    base = inst["base_uri"]
    assert base == f"{b.url}/consumers/rest-g/instances/c1"
    s, _ = http_json("POST", base + "/subscription", {"topics": ["orders"]}, key=key)
    assert s == 204
    s, sub = http_json("GET", base + "/subscription", key=key)
    assert sub == {"topics": ["orders"]}
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 6 and time.monotonic() < deadline:
        s, recs = http_json("GET", base + "/records?timeout=500", key=key)
        assert s == 200, recs
        got.extend(recs)
    assert sorted(r["value"] for r in got) == [f"r{i}" for i in range(6)]
    r0 = got[0]
    assert set(r0) >= {"topic", "key", "value", "partition", "offset", "timestamp", "headers"}
    assert r0["headers"] == [{"name": "h", "value": "aGk="}] and r0["timestamp"] > 0
    s, assigned = http_json("GET", base + "/assignments", key=key)
    assert len(assigned["partitions"]) == 3
    # commit the last consumed offset of partition 0: Confluent commits the next one
    last0 = max(r["offset"] for r in got if r["partition"] == 0)
    s, _ = http_json(
        "POST",
        base + "/offsets",
        {"offsets": [{"topic": "orders", "partition": 0, "offset": last0}]},
        key=key,
    )
    assert s == 204
    s, committed = http_json(
        "GET", base + "/offsets", {"partitions": [{"topic": "orders", "partition": 0}]}, key=key
    )
    assert committed["offsets"] == [
        {"topic": "orders", "partition": 0, "offset": last0 + 1, "metadata": ""}
    ]
    # seek back and read partition 0 again
    s, _ = http_json(
        "POST",
        base + "/positions",
        {"offsets": [{"topic": "orders", "partition": 0, "offset": 0}]},
        key=key,
    )
    assert s == 204
    again = []
    deadline = time.monotonic() + 10
    while len(again) < 2 and time.monotonic() < deadline:
        again.extend(http_json("GET", base + "/records?timeout=300", key=key)[1])
    assert [r["value"] for r in again if r["partition"] == 0][:2] == ["r0", "r3"]
    s, err = http_json("GET", f"{b.url}/consumers/rest-g/instances/nope/records", key=key)
    assert s == 404 and err["sluice_code"] == "UNKNOWN_CONSUMER_INSTANCE"
    assert err["error_code"] == 40403
    s, _ = http_json("DELETE", base, key=key)
    assert s == 204
    s, err = http_json("GET", base + "/records", key=key)
    assert s == 404


def test_cursor_reads_continue_on_any_broker(broker_factory):
    cluster = start_cluster(broker_factory, GROUP_TOPICS)
    key = cluster[0].api_key
    for i in range(9):
        produce(cluster[i % 3], key, "orders", i % 3, f"c{i}")
    s, c = http_json(
        "GET", f"{cluster[0].url}/sluice/v1/topics/orders/cursor?from=earliest", key=key
    )
    assert s == 200, c
    seen, cursor = [], c["cursor"]
    for hop in range(6):  # each read on another broker
        b = cluster[hop % 3]
        s, page = http_json(
            "GET", f"{b.url}/sluice/v1/cursors/{cursor}?max_records=2&format=text", key=key
        )
        assert s == 200, page
        seen.extend(r["value"] for r in page["records"])
        cursor = page["next_cursor"]
    assert sorted(seen) == [f"c{i}" for i in range(9)]
    s, page = http_json("GET", f"{cluster[1].url}/sluice/v1/cursors/{cursor}", key=key)
    assert page["records"] == []
    produce(cluster[1], key, "orders", 1, "late")
    s, page = http_json("GET", f"{cluster[2].url}/sluice/v1/cursors/{cursor}?format=text", key=key)
    assert [r["value"] for r in page["records"]] == ["late"]
    # a tampered cursor is refused
    _, mac = cursor.split(".")
    forged = base64.urlsafe_b64encode(b'{"v":1}').decode().rstrip("=") + "." + mac
    s, err = http_json("GET", f"{cluster[0].url}/sluice/v1/cursors/{forged}", key=key)
    assert s == 400 and err["error_code"] == "INVALID_CURSOR"


def test_two_instances_share_a_group_without_reading(gbroker):
    """An instance nobody reads from still gives up partitions to a new member."""
    b, key = gbroker, gbroker.api_key
    bases = []
    for name in ("i1", "i2"):
        s, inst = http_json("POST", f"{b.url}/consumers/rest-share", {"name": name}, key=key)
        assert s == 200
        bases.append(inst["base_uri"])
        s, _ = http_json(
            "POST", inst["base_uri"] + "/subscription", {"topics": ["orders"]}, key=key
        )
        assert s == 204
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        owned = [
            {
                (p["topic"], p["partition"])
                for p in http_json("GET", u + "/assignments", key=key)[1]["partitions"]
            }
            for u in bases
        ]
        if all(owned) and not owned[0] & owned[1] and len(owned[0] | owned[1]) == 3:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"no shared assignment: {owned}")
    for u in bases:
        assert http_json("DELETE", u, key=key)[0] == 204
