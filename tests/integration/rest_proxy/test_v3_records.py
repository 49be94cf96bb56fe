"""Confluent REST Proxy v3 records, replayed from Confluent's documented requests and
answers against a real broker: single produce, ``records:batch``, streaming mode, errors."""

from __future__ import annotations

import base64
import json
import re
import socket

from tests.integration.broker.util import fetch_all_values
from tests.integration.rest_proxy.conftest import JSON, ChunkedStream, call

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def records(b, topic="orders"):
    return f"/v3/clusters/{b.cluster_id}/topics/{topic}/records"


def assert_produce_response(body, b, topic, partition, key, value):
    """Confluent's ProduceResponse for one record."""
    assert body["error_code"] == 200
    assert body["cluster_id"] == b.cluster_id
    assert body["topic_name"] == topic
    assert body["partition_id"] == partition
    assert isinstance(body["offset"], int) and body["offset"] >= 0
    assert RFC3339.match(body["timestamp"]), body["timestamp"]
    assert body["key"] == key and body["value"] == value


def test_produce_one_record(rest):
    b = rest
    ans = call(
        b,
        "POST",
        records(b),
        {
            "partition_id": 1,
            "headers": [{"name": "Header-1", "value": base64.b64encode(b"Value-1").decode()}],
            "key": {"type": "BINARY", "data": base64.b64encode(b"foobar").decode()},
            "value": {"type": "JSON", "data": {"foo": "bar"}},
        },
    )
    assert ans.status == 200, ans
    assert ans.content_type == JSON
    body = ans.json()
    assert_produce_response(
        body, b, "orders", 1, {"type": "BINARY", "size": 6}, {"type": "JSON", "size": 13}
    )
    stored = dict(fetch_all_values(b, "orders", 1, body["offset"]))
    assert stored[body["offset"]] == b'{"foo":"bar"}'


def test_produce_string_value_without_key(rest):
    b = rest
    ans = call(b, "POST", records(b, "events"), {"value": {"type": "STRING", "data": "hi"}})
    assert ans.status == 200, ans
    assert_produce_response(ans.json(), b, "events", 0, None, {"type": "STRING", "size": 2})


def test_records_batch(rest):
    b = rest
    ans = call(
        b,
        "POST",
        records(b) + ":batch",
        {
            "entries": [
                {"id": "1", "partition_id": 0, "value": {"type": "JSON", "data": {"n": 1}}},
                {"id": "2", "partition_id": 0, "value": {"type": "BINARY", "data": "%%%"}},
                {"id": "3", "key": {"type": "STRING", "data": "k"}, "value": {"data": [3]}},
            ]
        },
    )
    assert ans.status == 207, ans
    assert ans.content_type == JSON
    body = ans.json()
    ok = {s["id"]: s for s in body["successes"]}
    assert set(ok) == {"1", "3"}
    for entry_id, key, value in (
        ("1", None, {"type": "JSON", "size": 7}),
        ("3", {"type": "STRING", "size": 1}, {"type": "JSON", "size": 3}),
    ):
        s = ok[entry_id]
        assert s["cluster_id"] == b.cluster_id and s["topic_name"] == "orders"
        assert isinstance(s["partition_id"], int) and isinstance(s["offset"], int)
        assert RFC3339.match(s["timestamp"])
        assert s["key"] == key and s["value"] == value
    (failure,) = body["failures"]
    assert failure["id"] == "2"
    assert failure["error_code"] == 422 and failure["sluice_code"] == "INVALID_REQUEST"
    assert "entries[1].value.data" in failure["message"]


def test_records_batch_entry_without_id_refuses_the_request(rest):
    b = rest
    before = fetch_all_values(b, "events", 0)
    ans = call(
        b,
        "POST",
        records(b, "events") + ":batch",
        {"entries": [{"id": "a", "value": {"data": 1}}, {"value": {"data": 2}}]},
    )
    assert ans.status == 422, ans
    err = ans.json()
    assert err["error_code"] == 422 and err["sluice_code"] == "INVALID_REQUEST"
    assert "entries[1].id" in err["message"]
    assert fetch_all_values(b, "events", 0) == before  # nothing appended


def test_streaming_mode_answers_each_record_as_it_is_appended(rest):
    b = rest
    stream = ChunkedStream(b, records(b))
    try:
        stream.send(b'{"partition_id": 2, "value": {"type": "STRING", "data": "s1"}}\n')
        (first,) = stream.lines(1)  # answered before the next record is sent
        assert stream.status == 200
        assert stream.headers["content-type"].startswith(JSON)
        assert stream.headers.get("transfer-encoding") == "chunked"
        assert_produce_response(first, b, "orders", 2, None, {"type": "STRING", "size": 2})
        # the next records in one chunk, back to back, one split over two chunks
        stream.send(
            b'{"partition_id": 2, "value": {"type": "STRING", "data": "s2"}}'
            b'{"partition_id": 2, "surprise": 1}\n{"partition_id": 2, "val'
        )
        stream.send(b'ue": {"type": "STRING", "data": "s3"}}\n')
        stream.end()
        answers = stream.finish()
    finally:
        stream.close()
    assert len(answers) == 4
    second, bad, third = answers[1:]
    assert second["offset"] == first["offset"] + 1
    assert bad["error_code"] == 422 and bad["sluice_code"] == "INVALID_REQUEST"
    assert "surprise" in bad["message"]
    assert third["offset"] == first["offset"] + 2  # the bad record took no offset
    values = dict(fetch_all_values(b, "orders", 2, first["offset"]))
    assert [values[first["offset"] + i] for i in range(3)] == [b"s1", b"s2", b"s3"]


def test_streaming_mode_with_a_whole_body(rest):
    """Records concatenated in a body with Content-Length (what fits the lean front)."""
    b = rest
    body = b"\n".join(
        json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": f"w{i}"}}).encode()
        for i in range(3)
    )
    ans = call(b, "POST", records(b), body)
    assert ans.status == 200, ans
    answers = [json.loads(line) for line in ans.raw.splitlines()]
    assert [a["error_code"] for a in answers] == [200, 200, 200]
    assert [a["offset"] - answers[0]["offset"] for a in answers] == [0, 1, 2]


def test_streaming_mode_first_record_error_is_the_request_error(rest):
    b = rest
    stream = ChunkedStream(b, records(b, "nope"))
    try:
        stream.send(b'{"value": {"data": 1}}')
        stream.end()
        stream.finish()
    finally:
        stream.close()
    # an unknown topic is known before the body: an ordinary error answer
    assert stream.status == 404
    err = json.loads(stream.body)
    assert err["error_code"] == 40403 and err["sluice_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    stream = ChunkedStream(b, records(b))
    try:
        stream.send(b'{"partition_id": 7, "value": {"data": 1}}{"value": {"data": 2}}')
        stream.end()
        stream.finish()
    finally:
        stream.close()
    assert stream.status == 404
    err = json.loads(stream.body)
    assert err["error_code"] == 40403


def test_errors_carry_confluent_codes_and_sluice_codes(rest):
    b = rest
    cases = [
        # (what, request, status, Confluent error_code, Sluice code)
        ("unknown topic", dict(path=records(b, "nope")), 404, 40403, "UNKNOWN_TOPIC_OR_PARTITION"),
        (
            "unknown cluster",
            dict(path="/v3/clusters/other/topics/orders/records"),
            404,
            404,
            "UNKNOWN_CLUSTER",
        ),
        ("no key", dict(auth=False), 401, 40101, "UNAUTHENTICATED"),
        (
            "form body",
            dict(content_type="application/x-www-form-urlencoded"),
            415,
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        ("unacceptable", dict(accept="text/html"), 406, 406, "NOT_ACCEPTABLE"),
        ("empty", dict(body=b""), 422, 42206, "INVALID_REQUEST"),
        ("malformed", dict(body=b"{oops"), 400, 400, "INVALID_REQUEST"),
        ("unknown field", dict(body={"values": []}), 422, 422, "INVALID_REQUEST"),
        ("no route", dict(path="/v3/clusters/x/nothing"), 404, 404, "NOT_FOUND"),
    ]
    for what, kw, status, code, sluice in cases:
        path = kw.pop("path", records(b))
        body = kw.pop("body", {"value": {"data": 1}})
        ans = call(b, "POST", path, body, **kw)
        assert ans.status == status, (what, ans)
        assert ans.content_type == JSON, (what, ans)
        err = ans.json()
        assert (err["error_code"], err["sluice_code"]) == (code, sluice), (what, err)
        assert err["message"], what
    # Sluice's own routes keep the string code
    ans = call(b, "GET", "/sluice/v1/topics/nope/partitions/0/offsets")
    assert ans.status == 404 and ans.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert "sluice_code" not in ans.json()


def test_accept_and_content_type_variants_that_are_accepted(rest):
    b = rest
    for content_type, accept in (
        ("application/json; charset=utf-8", None),
        (None, "*/*"),
        (JSON, "application/json, text/plain;q=0.5"),
        (JSON, "application/*"),
    ):
        ans = call(
            b,
            "POST",
            records(b, "events"),
            {"value": {"data": 1}},
            content_type=content_type,
            accept=accept,
        )
        assert ans.status == 200, (content_type, accept, ans)


def test_expect_continue_refusal_carries_the_confluent_code(rest):
    b = rest
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
        s.sendall(
            (
                f"POST {records(b)} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: {b.headers['Authorization']}\r\n"
                "Content-Type: application/json\r\nContent-Length: 999999999\r\n"
                "Expect: 100-continue\r\n\r\n"
            ).encode()
        )
        resp = s.recv(65536)
    head, _, body = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), resp
    err = json.loads(body)
    assert (err["error_code"], err["sluice_code"]) == (413, "REQUEST_TOO_LARGE")
