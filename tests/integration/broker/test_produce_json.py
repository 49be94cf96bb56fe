"""JSON produce (REST v3 shapes) and JSON fetch against a real broker."""

from __future__ import annotations

import base64
import json

from brokernodes.client.partitioner import partition_for_key
from tests.integration.broker.util import fetch_all_values, fetch_json, produce_json


def test_produce_one_record_answers_offset_and_is_fetchable(module_broker):
    b = module_broker
    status, body = produce_json(
        b,
        "events",
        {
            "key": {"type": "STRING", "data": "k1"},
            "value": {"type": "JSON", "data": {"n": 1}},
            "headers": [{"name": "trace", "value": base64.b64encode(b"abc").decode()}],
            "timestamp": "2026-11-23T12:00:00.000Z",
        },
    )
    assert status == 200, body
    assert body["cluster_id"] == b.cluster_id
    assert body["topic_name"] == "events"
    assert body["partition_id"] == 0
    assert body["timestamp"] == "2026-11-23T12:00:00.000Z"
    assert body["key"] == {"type": "STRING", "size": 2}
    assert body["value"] == {"type": "JSON", "size": len(b'{"n":1}')}
    offset = body["offset"]
    status, got = fetch_json(b, "events", 0, offset, max_records=1)
    assert status == 200
    (rec,) = got["records"]
    assert rec["offset"] == offset
    assert rec["key"] == "k1" and rec["key_format"] == "text"
    assert rec["value"] == {"n": 1} and rec["value_format"] == "json"
    assert rec["headers"] == [{"name": "trace", "value": base64.b64encode(b"abc").decode()}]
    assert rec["timestamp"] == 1795435200000
    assert rec["timestamp_type"] == "CREATE_TIME"
    assert got["next_offset"] == offset + 1


def test_json_fetch_formats(module_broker):
    b = module_broker
    raw = b"\xff\x00binary"
    status, body = produce_json(
        b,
        "events",
        {
            "key": {"type": "BINARY", "data": base64.b64encode(raw).decode()},
            "value": {"type": "STRING", "data": '{"looks": "like json"}'},
            "headers": [{"name": "empty", "value": None}],
            "timestamp": 1700000000000,
        },
    )
    assert status == 200, body
    off = body["offset"]

    def one(fmt):
        status, got = fetch_json(b, "events", 0, off, max_records=1, format=fmt)
        assert status == 200, got
        return got["records"][0]

    r = one("json")
    assert (r["key"], r["key_format"]) == (base64.b64encode(raw).decode(), "base64")
    assert (r["value"], r["value_format"]) == ({"looks": "like json"}, "json")
    assert r["headers"] == [{"name": "empty", "value": None}]
    assert r["timestamp"] == 1700000000000
    r = one("text")
    assert (r["value"], r["value_format"]) == ('{"looks": "like json"}', "text")
    assert r["key_format"] == "base64"
    r = one("base64")
    assert base64.b64decode(r["value"]) == b'{"looks": "like json"}'
    assert r["value_format"] == "base64" and r["key_format"] == "base64"


def test_tombstone_and_acks_zero(module_broker):
    b = module_broker
    status, body = produce_json(b, "events", {"key": {"type": "STRING", "data": "gone"}})
    assert status == 200 and body["value"] is None
    status, got = fetch_json(b, "events", 0, body["offset"], max_records=1)
    assert got["records"][0]["value"] is None
    status, body = produce_json(
        b, "events", {"value": {"type": "STRING", "data": "fire"}}, query="?acks=0"
    )
    assert status == 202 and body == {}


def test_batch_answers_207_with_successes_and_failures(module_broker):
    b = module_broker
    entries = [
        {"id": "ok1", "partition_id": 0, "value": {"type": "STRING", "data": "a"}},
        {"id": "bad64", "value": {"type": "BINARY", "data": "not base64!"}},
        {"id": "ok2", "partition_id": 0, "value": {"type": "STRING", "data": "b"}},
        {"id": "nopart", "partition_id": 99, "value": {"type": "STRING", "data": "c"}},
        {"id": "badts", "value": {"type": "STRING", "data": "d"}, "timestamp": "yesterday"},
        {"id": "ok3", "partition_id": 2, "value": {"type": "STRING", "data": "e"}},
    ]
    status, body = b.json(
        "POST", f"/v3/clusters/{b.cluster_id}/topics/orders/records:batch", {"entries": entries}
    )
    assert status == 207, body
    ok = {s["id"]: s for s in body["successes"]}
    failed = {f["id"]: f for f in body["failures"]}
    assert set(ok) == {"ok1", "ok2", "ok3"}
    assert ok["ok2"]["offset"] == ok["ok1"]["offset"] + 1  # one batch per partition
    assert ok["ok3"]["partition_id"] == 2
    # Confluent's integer codes, Sluice's string beside them
    assert failed["bad64"]["error_code"] == 422
    assert failed["bad64"]["sluice_code"] == "INVALID_REQUEST"
    assert "entries[1].value.data" in failed["bad64"]["message"]
    assert failed["nopart"]["error_code"] == 40403
    assert failed["nopart"]["sluice_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert failed["badts"]["sluice_code"] == "INVALID_REQUEST"
    assert "timestamp" in failed["badts"]["message"]
    # successes carry what a single produce answers
    assert ok["ok1"]["cluster_id"] == b.cluster_id and ok["ok1"]["topic_name"] == "orders"
    assert ok["ok1"]["value"] == {"type": "STRING", "size": 1} and ok["ok1"]["key"] is None
    assert ok["ok1"]["timestamp"].endswith("Z")
    values = dict(fetch_all_values(b, "orders", 0, ok["ok1"]["offset"]))
    assert values[ok["ok1"]["offset"]] == b"a" and values[ok["ok2"]["offset"]] == b"b"


def test_keyed_records_land_on_murmur2_partition_in_order(module_broker):
    b = module_broker
    keys = [f"user-{i}" for i in range(12)]
    entries = [
        {
            "id": f"{k}-{n}",
            "key": {"type": "STRING", "data": k},
            "value": {"type": "JSON", "data": n},
        }
        for n in range(5)
        for k in keys
    ]
    status, body = b.json(
        "POST", f"/v3/clusters/{b.cluster_id}/topics/orders/records:batch", {"entries": entries}
    )
    assert status == 207 and not body["failures"], body
    placed = {s["id"]: s for s in body["successes"]}
    for k in keys:
        expected = partition_for_key(k.encode(), 3)
        offs = [placed[f"{k}-{n}"] for n in range(5)]
        assert {s["partition_id"] for s in offs} == {expected}
        assert [s["offset"] for s in offs] == sorted(s["offset"] for s in offs)
    # and one record at a time too, checked by reading back in order
    for n in range(5, 8):
        for k in keys[:3]:
            status, one = produce_json(
                b, "orders", {"key": {"type": "STRING", "data": k}, "value": {"data": n}}
            )
            assert status == 200 and one["partition_id"] == partition_for_key(k.encode(), 3)
    for k in keys[:3]:
        p = partition_for_key(k.encode(), 3)
        status, got = fetch_json(b, "orders", p, 0, max_records=10000)
        seen = [json.loads(json.dumps(r["value"])) for r in got["records"] if r["key"] == k]
        assert seen == list(range(8))


def test_keyless_records_stick_within_a_request(module_broker):
    b = module_broker
    entries = [{"id": str(i), "value": {"type": "STRING", "data": str(i)}} for i in range(10)]
    status, body = b.json(
        "POST", f"/v3/clusters/{b.cluster_id}/topics/orders/records:batch", {"entries": entries}
    )
    assert status == 207
    assert len({s["partition_id"] for s in body["successes"]}) == 1
