"""Every kind of bad input gets its documented error, and the broker keeps serving."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.integration.broker.util import (
    batch,
    fetch_all_values,
    fetch_binary,
    json_body_of,
    produce_binary,
    produce_json,
    raw_request,
    status_of,
)


def test_auth_missing_wrong_and_malformed_is_401(module_broker):
    b = module_broker
    path = "/sluice/v1/metadata"
    for headers in (
        {},
        {"Authorization": "Bearer sk_test.wrong-secret"},
        {"Authorization": "Bearer sk_unknown.s3cret-test-value"},
        {"Authorization": "Bearer no-dot"},
        {"Authorization": "Basic c2tfdGVzdDpz"},
    ):
        status, body = b.json("GET", path, auth=False, headers=headers)
        assert status == 401, headers
        assert body["error_code"] == "UNAUTHENTICATED"
        assert "s3cret" not in body["message"] and "wrong-secret" not in body["message"]
    # every data-plane route needs it, health and metrics do not
    for method, p in (
        ("POST", f"/v3/clusters/{b.cluster_id}/topics/events/records"),
        ("POST", "/sluice/v1/topics/events/partitions/0/batches"),
        ("GET", "/sluice/v1/topics/events/partitions/0/batches?offset=0"),
        ("GET", "/sluice/v1/topics/events/partitions/0/records?offset=0"),
        ("GET", "/sluice/v1/topics/events/partitions/0/offsets"),
        ("POST", "/sluice/v1/producer-ids"),
    ):
        assert b.request(method, p, b"{}", auth=False)[0] == 401, p
    for p in ("/healthz", "/readyz", "/metrics"):
        assert b.request("GET", p, auth=False)[0] == 200
    assert "s3cret-test-value" not in b.output()


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        (b"{not json", "malformed JSON", 400),  # Confluent: 400 for JSON that does not parse
        (b"", "empty", 42206),  # 422 for JSON that is not a record, 42206 for no data
        (b"[1, 2]", "expected a JSON object", 422),
        (b'{"value": {"type": "BINARY", "data": "@@@"}}', "body.value.data", 422),
        (b'{"value": {"type": "STRING", "data": 5}}', "body.value.data", 422),
        (b'{"value": {"type": "XML", "data": "x"}}', "body.value.type", 422),
        (b'{"key": "bare"}', "body.key", 422),
        (b'{"headers": [{"name": "h", "value": "%%"}]}', "body.headers[0].value", 422),
        (b'{"timestamp": "noon"}', "body.timestamp", 422),
        (b'{"partition_id": -1}', "body.partition_id", 422),
        (b'{"surprise": 1}', "surprise", 422),
    ],
)
def test_bad_json_produce_is_refused_naming_the_field(module_broker, body, field, code):
    b = module_broker
    status, _, data = b.request(
        "POST",
        f"/v3/clusters/{b.cluster_id}/topics/events/records",
        body,
        headers={"Content-Type": "application/json"},
    )
    err = __import__("json").loads(data)
    assert status == code // 100 if code > 999 else status == code
    assert err["error_code"] == code and err["sluice_code"] == "INVALID_REQUEST"
    assert field in err["message"]


def test_bad_batch_requests(module_broker):
    b = module_broker
    path = f"/v3/clusters/{b.cluster_id}/topics/events/records:batch"
    assert b.json("POST", path, {"records": []})[1]["sluice_code"] == "INVALID_REQUEST"
    assert b.json("POST", path, {"entries": []})[1]["sluice_code"] == "INVALID_REQUEST"
    status, err = b.json("POST", path, {"entries": [{"id": "1", "value": {"data": 1}}] * 1001})
    assert status == 422 and "1000" in err["message"]
    # an entry without its id refuses the request (Confluent's schema requires it)
    status, err = b.json("POST", path, {"entries": [{"id": "a"}, {"value": {"data": 1}}]})
    assert (status, err["error_code"]) == (422, 422)
    assert "entries[1].id: required" in err["message"]


@pytest.mark.parametrize(
    "query",
    [
        "offset=abc",
        "offset=-1",
        "",
        "offset=0&max_bytes=0",
        "offset=0&max_wait_ms=999999999",
        "offset=0&min_bytes=x",
    ],
)
def test_bad_fetch_params_are_400(module_broker, query):
    status, _, data = module_broker.request(
        "GET", f"/sluice/v1/topics/events/partitions/0/batches?{query}"
    )
    assert status == 400 and b"INVALID_REQUEST" in data and b"query parameter" in data


def test_unknown_topic_partition_cluster_route_method(module_broker):
    b = module_broker
    status, err = b.json("GET", "/sluice/v1/topics/nope/partitions/0/batches?offset=0")
    assert (status, err["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    status, err = b.json("GET", "/sluice/v1/topics/events/partitions/5/records?offset=0")
    assert (status, err["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    status, err = produce_binary(b, "events", 9, batch([b"x"]))
    assert (status, err["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    status, err = b.json("GET", "/sluice/v1/topics/events/partitions/x/offsets")
    assert (status, err["error_code"]) == (400, "INVALID_REQUEST")
    status, err = produce_json(b, "nope", {"value": {"data": 1}})
    assert (status, err["error_code"]) == (404, 40403)
    assert err["sluice_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    status, err = produce_json(b, "events", {"value": {"data": 1}}, cluster="other")
    assert (status, err["error_code"], err["sluice_code"]) == (404, 404, "UNKNOWN_CLUSTER")
    status, err = b.json("GET", "/no/such/route")
    assert (status, err["error_code"]) == (404, "NOT_FOUND")
    status, err = b.json("DELETE", "/sluice/v1/topics/events/partitions/0/batches")
    assert (status, err["error_code"]) == (405, "METHOD_NOT_ALLOWED")
    assert produce_binary(b, "events", 0, batch([b"all"]), acks="all")[0] == 200
    status, err = produce_binary(b, "events", 0, batch([b"x"]), acks="2")
    assert (status, err["error_code"]) == (400, "INVALID_REQUEST")


def test_offset_out_of_range_is_416_with_bounds(module_broker):
    b = module_broker
    end = b.json("GET", "/sluice/v1/topics/orders/partitions/0/offsets")[1]["offset"]
    for path in ("batches", "records"):
        status, err = b.json(
            "GET", f"/sluice/v1/topics/orders/partitions/0/{path}?offset={end + 100}"
        )
        assert status == 416 and err["error_code"] == "OFFSET_OUT_OF_RANGE"
        assert err["log_start_offset"] == 0 and err["log_end_offset"] == end


def test_corrupt_and_oversized_batches_are_refused_whole(module_broker):
    b = module_broker
    before = fetch_all_values(b, "small", 0)
    good = batch([b"ok"])
    bad_crc = bytearray(batch([b"bad"]))
    bad_crc[-1] ^= 0xFF
    for body, code, status in (
        (good + bytes(bad_crc), "CORRUPT_MESSAGE", 400),
        (good[:-3], "CORRUPT_MESSAGE", 400),
        (b"\x00" * 10, "CORRUPT_MESSAGE", 400),
        (good + good[:30], "CORRUPT_MESSAGE", 400),
        (batch([b"m" * 3000]), "MESSAGE_TOO_LARGE", 413),  # max.message.bytes=2048
        (b"", "INVALID_REQUEST", 400),
    ):
        got_status, err = produce_binary(b, "small", 0, body)
        assert (got_status, err["error_code"]) == (status, code), err
        assert err["message"]
    magic = bytearray(good)
    magic[16] = 1
    assert produce_binary(b, "small", 0, bytes(magic))[1]["error_code"] == "CORRUPT_MESSAGE"
    codec = bytearray(good)
    codec[22] |= 7  # attributes low bits: an unknown codec (CRC is checked after)
    status, err = produce_binary(b, "small", 0, bytes(codec))
    assert status == 400 and err["error_code"] in (
        "UNSUPPORTED_COMPRESSION_TYPE",
        "CORRUPT_MESSAGE",
    )
    assert fetch_all_values(b, "small", 0) == before  # nothing was appended
    assert produce_binary(b, "small", 0, good)[0] == 200


def test_compacted_topic_refuses_keyless_records(module_broker):
    b = module_broker
    status, err = produce_binary(b, "compacted", 0, batch([b"v"]))
    assert (status, err["error_code"]) == (400, "INVALID_RECORD")
    status, err = produce_json(b, "compacted", {"value": {"data": 1}})
    assert (status, err["error_code"], err["sluice_code"]) == (400, 40002, "INVALID_RECORD")
    assert produce_binary(b, "compacted", 0, batch([b"v"], key=b"k"))[0] == 200


def test_a_partition_led_elsewhere_is_forwarded_once(broker_factory):
    """A call for a partition another broker leads goes on to it (docs/data-plane-api.md,
    "One front door"); this leader cannot be reached, so nothing is sent and the answer is a
    retriable 503. A call already forwarded is answered 421 with the leader."""
    other = {"id": 2, "url": "http://127.0.0.1:1"}
    b = broker_factory({"split": (2, {})}, other_brokers=[other], leaders={"split": [1, 2]})
    assert produce_binary(b, "split", 0, batch([b"x"]))[0] == 200
    status, err = produce_binary(b, "split", 1, batch([b"x"]))
    assert status == 503 and err["error_code"] == "LEADER_NOT_AVAILABLE", err
    status, _, _ = fetch_binary(b, "split", 1, 0)
    assert status == 503
    status, err = b.json(
        "GET", "/sluice/v1/topics/split/partitions/1/offsets", headers={"Sluice-Forwarded": "3"}
    )
    assert status == 421 and err["error_code"] == "NOT_LEADER_OR_FOLLOWER"
    assert err["leader_id"] == 2 and err["leader_url"] == "http://127.0.0.1:1"
    # keyless JSON records go only to partitions this broker leads
    for _ in range(5):
        status, ans = produce_json(b, "split", {"value": {"data": 1}})
        assert status == 200 and ans["partition_id"] == 0


def test_request_too_large_and_slow_clients_do_not_hurt_others(broker_factory):
    b = broker_factory(extra_args=["--max-request-bytes", "65536", "--body-timeout-ms", "800"])
    # announced too large: refused from Content-Length, before the body is read
    head = (
        f"POST /sluice/v1/topics/events/partitions/0/batches HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: Bearer {b.api_key}\r\nContent-Length: 10000000\r\n\r\n"
    ).encode()
    resp = raw_request(b.port, head + b"\x00" * 1000, timeout=5)
    assert status_of(resp) == 413 and json_body_of(resp)["error_code"] == "REQUEST_TOO_LARGE"
    # chunked body over the limit
    status, _, data = b.request(
        "POST",
        "/sluice/v1/topics/events/partitions/0/batches",
        iter([b"\x00" * 40000, b"\x00" * 40000]),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert status == 413 and b"REQUEST_TOO_LARGE" in data

    # a client that stalls mid-body is cut off with 408 while others are served
    stalled = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    body = batch([b"slow"])
    stalled.sendall(
        (
            f"POST /sluice/v1/topics/events/partitions/0/batches HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {b.api_key}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body[:20]
    )
    started = time.monotonic()
    served = []

    def other_client():
        for i in range(5):
            served.append(produce_binary(b, "events", 0, batch([b"fast%d" % i]))[0])

    t = threading.Thread(target=other_client)
    t.start()
    t.join(5)
    assert served == [200] * 5 and time.monotonic() - started < 0.8
    chunks = []
    while True:
        chunk = stalled.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    stalled.close()
    resp = b"".join(chunks)
    assert status_of(resp) == 408 and json_body_of(resp)["error_code"] == "REQUEST_TIMED_OUT"
    assert 0.7 < time.monotonic() - started < 5
    values = [v for _, v in fetch_all_values(b, "events", 0)]
    assert values == [b"fast%d" % i for i in range(5)]  # nothing of the slow one
    assert b.json("GET", "/readyz", auth=False)[0] == 200


def test_expect_continue_refuses_oversize_before_the_body(broker_factory):
    b = broker_factory(extra_args=["--max-request-bytes", "1000"])
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
        s.sendall(
            (
                "POST /sluice/v1/topics/events/partitions/0/batches HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {b.api_key}\r\nContent-Length: 5000\r\n"
                "Expect: 100-continue\r\n\r\n"
            ).encode()
        )
        resp = s.recv(65536)
    assert status_of(resp) == 413 and b"REQUEST_TOO_LARGE" in resp
    body = batch([b"ok"])
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as s:
        s.sendall(
            (
                "POST /sluice/v1/topics/events/partitions/0/batches HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {b.api_key}\r\nContent-Length: {len(body)}\r\n"
                "Expect: 100-continue\r\n\r\n"
            ).encode()
        )
        assert s.recv(65536).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        resp = s.recv(65536)
    assert status_of(resp) == 200
