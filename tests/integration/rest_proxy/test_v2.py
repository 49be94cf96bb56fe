"""Confluent REST Proxy v2, replayed from Confluent's documented requests and answers
against a real broker: produce (binary and JSON embedded formats) and consumer instances
(create, subscribe, records, offsets, positions, delete)."""

from __future__ import annotations

import base64
import time

from tests.integration.broker.util import fetch_all_values
from tests.integration.rest_proxy.conftest import V2, V2_BINARY, V2_JSON, call


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_produce_binary_to_a_topic(rest):
    b = rest
    ans = call(
        b,
        "POST",
        "/topics/orders",
        {
            "records": [
                {"key": b64(b"key"), "value": b64(b"confluent")},
                {"value": b64(b"kafka"), "partition": 1},
                {"value": b64(b"logs")},
            ]
        },
        content_type=V2_BINARY,
        accept=V2,
    )
    assert ans.status == 200, ans
    assert ans.content_type == V2
    body = ans.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    offsets = body["offsets"]
    assert len(offsets) == 3
    for o in offsets:
        assert set(o) == {"partition", "offset", "error_code", "error"}
        assert o["error_code"] is None and o["error"] is None
        assert isinstance(o["offset"], int)
    assert offsets[1]["partition"] == 1
    stored = dict(fetch_all_values(b, "orders", 1, offsets[1]["offset"]))
    assert stored[offsets[1]["offset"]] == b"kafka"


def test_produce_json_to_a_partition(rest):
    b = rest
    ans = call(
        b,
        "POST",
        "/topics/v2-json/partitions/0",
        {"records": [{"value": {"foo": "bar"}}, {"key": "k", "value": [1, 2]}]},
        content_type=V2_JSON,
        accept=V2,
    )
    assert ans.status == 200, ans
    offsets = ans.json()["offsets"]
    assert [o["partition"] for o in offsets] == [0, 0]
    assert offsets[1]["offset"] == offsets[0]["offset"] + 1
    stored = dict(fetch_all_values(b, "v2-json", 0, offsets[0]["offset"]))
    assert stored[offsets[0]["offset"]] == b'{"foo":"bar"}'
    assert stored[offsets[1]["offset"]] == b"[1,2]"


def test_produce_errors(rest):
    b = rest
    one = {"records": [{"value": b64(b"x")}]}
    ans = call(b, "POST", "/topics/nope", one, content_type=V2_BINARY)
    assert ans.status == 404 and ans.json()["error_code"] == 40401, ans
    assert ans.json()["sluice_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    ans = call(b, "POST", "/topics/orders/partitions/9", one, content_type=V2_BINARY)
    assert ans.status == 404 and ans.json()["error_code"] == 40402, ans
    avro = "application/vnd.kafka.avro.v2+json"
    ans = call(b, "POST", "/topics/orders", one, content_type=avro)
    assert ans.status == 415 and ans.json()["error_code"] == 415, ans
    ans = call(
        b, "POST", "/topics/orders", {"records": [{"value": "not base64!"}]}, content_type=V2_BINARY
    )
    assert ans.status == 422 and ans.json()["error_code"] == 422, ans
    assert "records[0].value" in ans.json()["message"]
    ans = call(b, "POST", "/topics/orders", one, content_type=V2_BINARY, accept="text/html")
    assert ans.status == 406 and ans.json()["error_code"] == 406, ans


def create(b, group, name, fmt, status=200):
    ans = call(
        b,
        "POST",
        f"/consumers/{group}",
        {"name": name, "format": fmt, "auto.offset.reset": "earliest"},
        content_type=V2,
    )
    assert ans.status == status, ans
    return ans


def read_records(b, base_path, accept, want, timeout=15.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        ans = call(b, "GET", base_path + "/records?timeout=500", accept=accept)
        assert ans.status == 200, ans
        got.extend(ans.json())
        last = ans
    return got, last


def test_consumer_instance_json(rest):
    b = rest
    produced = call(
        b,
        "POST",
        "/topics/v2-consume",
        {"records": [{"key": "k0", "value": {"n": 0}}, {"key": "k1", "value": {"n": 1}}]},
        content_type=V2_JSON,
    )
    assert produced.status == 200, produced
    ans = create(b, "v2-json-group", "ci-json", "json")
    assert ans.content_type == V2
    inst = ans.json()
    assert inst["instance_id"] == "ci-json"
    assert inst["base_uri"].endswith("/consumers/v2-json-group/instances/ci-json")
    base = "/consumers/v2-json-group/instances/ci-json"

    dup = create(b, "v2-json-group", "ci-json", "json", status=409)
    assert dup.json()["error_code"] == 40902
    assert dup.json()["sluice_code"] == "CONSUMER_INSTANCE_EXISTS"

    ans = call(b, "POST", base + "/subscription", {"topics": ["v2-consume"]}, content_type=V2)
    assert ans.status == 204 and ans.raw == b"", ans
    ans = call(b, "GET", base + "/subscription", accept=V2)
    assert ans.status == 200 and ans.json() == {"topics": ["v2-consume"]}

    got, last = read_records(b, base, V2_JSON, 2)
    assert last.content_type == V2_JSON
    assert [(r["key"], r["value"]) for r in got] == [("k0", {"n": 0}), ("k1", {"n": 1})]
    for r in got:
        assert r["topic"] == "v2-consume" and r["partition"] == 0 and isinstance(r["offset"], int)

    # the other embedded format is Confluent's 406 / 40601
    ans = call(b, "GET", base + "/records?timeout=0", accept=V2_BINARY)
    assert ans.status == 406 and ans.json()["error_code"] == 40601, ans

    # commit the last record read: the committed offset is the next one
    last_offset = got[-1]["offset"]
    ans = call(
        b,
        "POST",
        base + "/offsets",
        {"offsets": [{"topic": "v2-consume", "partition": 0, "offset": last_offset}]},
        content_type=V2,
    )
    assert ans.status == 204, ans
    ans = call(
        b,
        "GET",
        base + "/offsets",
        {"partitions": [{"topic": "v2-consume", "partition": 0}]},
        content_type=V2,
        accept=V2,
    )
    assert ans.status == 200 and ans.content_type == V2, ans
    assert ans.json() == {
        "offsets": [
            {"topic": "v2-consume", "partition": 0, "offset": last_offset + 1, "metadata": ""}
        ]
    }

    # positions: seek to the first record again, then to the beginning
    ans = call(
        b,
        "POST",
        base + "/positions",
        {"offsets": [{"topic": "v2-consume", "partition": 0, "offset": got[0]["offset"]}]},
        content_type=V2,
    )
    assert ans.status == 204, ans
    again, _ = read_records(b, base, V2_JSON, 2)
    assert [r["offset"] for r in again[:2]] == [r["offset"] for r in got]
    ans = call(
        b,
        "POST",
        base + "/positions/beginning",
        {"partitions": [{"topic": "v2-consume", "partition": 0}]},
        content_type=V2,
    )
    assert ans.status == 204, ans

    ans = call(b, "DELETE", base, content_type=V2)
    assert ans.status == 204, ans
    ans = call(b, "GET", base + "/records", accept=V2_JSON)
    assert ans.status == 404 and ans.json()["error_code"] == 40403, ans


def test_consumer_instance_binary(rest):
    b = rest
    produced = call(
        b,
        "POST",
        "/topics/v2-binary",
        {"records": [{"key": b64(b"k"), "value": b64(b"\x00\xffbytes")}]},
        content_type=V2_BINARY,
    )
    assert produced.status == 200, produced
    create(b, "v2-binary-group", "ci-bin", "binary")
    base = "/consumers/v2-binary-group/instances/ci-bin"
    ans = call(b, "POST", base + "/subscription", {"topics": ["v2-binary"]}, content_type=V2)
    assert ans.status == 204, ans
    got, last = read_records(b, base, V2_BINARY, 1)
    assert last.content_type == V2_BINARY
    assert got[0]["key"] == b64(b"k") and got[0]["value"] == b64(b"\x00\xffbytes")
    # no Accept: the instance's own format type
    ans = call(b, "GET", base + "/records?timeout=0")
    assert ans.status == 200 and ans.content_type == V2_BINARY, ans
    ans = call(
        b,
        "POST",
        base + "/subscription",
        b"topics=x",
        content_type="application/x-www-form-urlencoded",
    )
    assert ans.status == 415 and ans.json()["error_code"] == 415, ans
    assert call(b, "DELETE", base).status == 204
