"""The lean HTTP/1.1 front (``brokernodes.server.http.fast``): it answers the produce routes
exactly as aiohttp does, and hands any other request's connection to aiohttp intact."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from http.client import HTTPConnection

import pytest

from brokernodes.records.batch import decode_batches
from tests.integration.broker.util import (
    BINARY,
    batch,
    fetch_all_values,
    fetch_binary,
    json_body_of,
    produce_binary,
    raw_request,
    status_of,
)


def _post(
    path: str, body: bytes, auth: str | None, *, close: bool = True, extra: str = ""
) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    if auth is not None:
        head += f"Authorization: {auth}\r\n"
    head += extra + ("Connection: close\r\n" if close else "") + "\r\n"
    return head.encode() + body


def _get(path: str, auth: str | None) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n"
    if auth is not None:
        head += f"Authorization: {auth}\r\n"
    return (head + "Connection: close\r\n\r\n").encode()


def _parse(response: bytes) -> tuple[int, dict[str, str], object]:
    """(status, headers, body): JSON decoded, record batches as their (offset, value) rows."""
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert int(headers["content-length"]) == len(body)
    assert "date" in headers
    if headers.get("content-type") == BINARY:
        rows = [(r.offset, r.value) for b in decode_batches(body) for r in b.records]
        return int(lines[0].split(" ")[1]), headers, rows
    return int(lines[0].split(" ")[1]), headers, json.loads(body) if body else None


def _exchange(broker, requests: list[bytes]) -> list[tuple[int, dict[str, str], object]]:
    return [_parse(raw_request(broker.port, r)) for r in requests]


def test_the_fast_front_answers_like_aiohttp(broker_factory):
    """The same requests against a broker on each front: the same status, body and
    headers that matter (Content-Type, the throttle header, the fetch's offsets), errors
    included; produce, both fetches and the offsets lookup."""
    fast = broker_factory(name="fast")
    slow = broker_factory(name="aiohttp", extra_args=["--http-front", "aiohttp"])

    def requests(b) -> list[bytes]:
        auth = b.headers["Authorization"]
        v3 = f"/v3/clusters/{b.cluster_id}/topics"
        binary = "/sluice/v1/topics/events/partitions/0/batches"
        record = json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": "x"}})
        entries = json.dumps(
            {
                "entries": [
                    {"id": "a", "partition_id": 1, "value": {"data": 1}},
                    {"id": "b", "partition_id": 2},
                    {"id": "c", "partition_id": 7},
                ]
            }
        )
        good = batch([b"one", b"two"], ts=1_000)
        return [
            _post(f"{v3}/events/records", record.encode(), auth),
            _post(f"{v3}/events/records?acks=0", record.encode(), auth),
            _post(f"{v3}/events/records?acks=all", record.encode(), auth),
            _post(f"{v3}/events/records?acks=2", record.encode(), auth),
            _post(f"{v3}/events/records", b'{"value": {"type": "NOPE"}}', auth),
            _post(f"{v3}/events/records", b"{not json", auth),
            _post(f"{v3}/nosuchtopic/records", record.encode(), auth),
            _post("/v3/clusters/other/topics/events/records", record.encode(), auth),
            _post(f"{v3}/events/records", record.encode(), None),
            _post(f"{v3}/events/records", record.encode(), "Bearer nokey.nosecret"),
            _post(f"{v3}/orders/records:batch", entries.encode(), auth),
            _post(binary, good, auth, extra=f"Content-Type: {BINARY}\r\n"),
            _post(binary, b"", auth),
            _post(binary, good[:-1] + bytes([good[-1] ^ 1]), auth),  # CRC mismatch
            _post("/sluice/v1/topics/events/partitions/9/batches", good, auth),
            _post(binary + "?acks=0", good, auth),
            _get(binary + "?offset=0", auth),
            _get(binary + "?offset=1&max_bytes=1", auth),  # one batch even if larger (KIP-74)
            _get(binary + "?offset=7", auth),  # at the log end: empty
            _get(binary + "?offset=99", auth),  # OFFSET_OUT_OF_RANGE, with the bounds
            _get(binary + "?offset=-1", auth),
            _get(binary + "?offset=0&max_wait_ms=x", auth),
            _get(binary, auth),  # no offset
            _get(binary + "?offset=0", None),
            _get("/sluice/v1/topics/events/partitions/9/batches?offset=0", auth),
            _get("/sluice/v1/topics/events/partitions/0/records?offset=0&format=text", auth),
            _get("/sluice/v1/topics/events/partitions/0/records?offset=0&format=xml", auth),
            _get("/sluice/v1/topics/events/partitions/0/offsets?timestamp=latest", auth),
            _get("/sluice/v1/topics/events/partitions/0/offsets?timestamp=soon", auth),
            _get("/sluice/v1/metadata", auth),
            _get("/sluice/v1/metadata", None),
            _post("/sluice/v1/producer-ids", b"", auth),
        ]

    answers_fast = _exchange(fast, requests(fast))
    answers_slow = _exchange(slow, requests(slow))
    for i, (a, b) in enumerate(zip(answers_fast, answers_slow, strict=True)):
        status_a, headers_a, body_a = a
        status_b, headers_b, body_b = b
        assert status_a == status_b, (i, a, b)
        assert headers_a.get("content-type") == headers_b.get("content-type"), (i, a, b)
        assert ("sluice-throttle-time-ms" in headers_a) == ("sluice-throttle-time-ms" in headers_b)
        # aiohttp sends a Server header (without versions), the fast front none: which one answered
        assert "server" not in headers_a and "server" in headers_b, (i, headers_a, headers_b)
        for name in ("sluice-high-watermark", "sluice-log-start-offset", "sluice-log-end-offset"):
            assert headers_a.get(name) == headers_b.get(name), (i, name, headers_a, headers_b)
        if isinstance(body_a, dict):
            for volatile in ("timestamp", "message", "request_id", "cluster_id", "brokers"):
                body_a.pop(volatile, None)
                body_b.pop(volatile, None)
            for side in (body_a, body_b):
                for row in [*side.get("successes", ()), *side.get("records", ())]:
                    row.pop("timestamp")
        assert body_a == body_b, (i, a, b)
    # the answers cover success, accepted, and several error codes
    statuses = [s for s, _, _ in answers_fast]
    assert {200, 202, 207, 400, 401, 404, 416}.issubset(set(statuses)), statuses
    # the binary fetches: the partition's rows, one batch for max_bytes=1, none at the end
    fetches = [body for _, headers, body in answers_fast if headers["content-type"] == BINARY]
    assert [len(rows) for rows in fetches] == [7, 1, 0], fetches
    assert [offset for offset, _ in fetches[0]] == list(range(7))
    # the rows really landed on the fast broker, in order
    assert [v for _, v in fetch_all_values(fast, "events", 0)][-4:] == [b"one", b"two"] * 2


def test_a_connection_moves_from_the_fast_front_to_aiohttp_for_good(broker):
    """Produce (fast), a readiness check (aiohttp takes the connection), produce again (now
    aiohttp's), all on one keep-alive connection, answered in order."""
    conn = HTTPConnection("127.0.0.1", broker.port, timeout=10)
    headers = {**broker.headers, "Content-Type": "application/json"}
    path = f"/v3/clusters/{broker.cluster_id}/topics/events/records"
    offsets, servers = [], []
    try:
        for step in ("produce", "readyz", "produce", "produce"):
            if step == "readyz":
                conn.request("GET", "/readyz")
                resp = conn.getresponse()
                assert resp.status == 200, resp.read()
                resp.read()
                continue
            body = json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": step}})
            conn.request("POST", path, body.encode(), headers)
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            assert resp.status == 200, answer
            offsets.append(answer["offset"])
            servers.append(resp.getheader("Server"))
    finally:
        conn.close()
    assert offsets == [offsets[0], offsets[0] + 1, offsets[0] + 2]
    # the first produce was the fast front's (no Server header), the later ones aiohttp's
    # (a Server header without versions)
    assert servers[0] is None and all(s == "Sluice" for s in servers[1:]), servers


def test_bodies_arriving_in_pieces_and_pipelined_requests(broker):
    """A head without its body, a body in pieces, the next request's head in the same
    segment as the end of the previous body: each answered once, in order."""
    auth = broker.headers["Authorization"]
    path = "/sluice/v1/topics/events/partitions/0/batches"
    first, second = batch([b"piece-1"]), batch([b"piece-2"])
    data = _post(path, first, auth, close=False) + _post(path, second, auth)
    cuts = [10, 80, len(data) - len(second) - 30, len(data) - 5]
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        last = 0
        for cut in cuts:
            s.sendall(data[last:cut])
            last = cut
            time.sleep(0.05)
        s.sendall(data[last:])
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    parts = raw.split(b"HTTP/1.1 ")[1:]
    assert [int(p.split(b" ", 1)[0]) for p in parts] == [200, 200]
    assert b"Server:" not in raw  # both answered by the fast front, not handed off
    assert [v for _, v in fetch_all_values(broker, "events", 0)] == [b"piece-1", b"piece-2"]


@pytest.mark.parametrize(
    "variant",
    ["chunked", "http10", "percent", "duplicate_length", "bad_length", "long_header"],
)
def test_requests_the_fast_front_does_not_take_are_served_by_aiohttp(broker, variant):
    auth = broker.headers["Authorization"]
    body = batch([variant.encode()])
    path = "/sluice/v1/topics/events/partitions/0/batches"
    head = f"Host: x\r\nAuthorization: {auth}\r\nConnection: close\r\n"
    expected = 200
    if variant == "chunked":
        request = (
            (
                f"POST {path} HTTP/1.1\r\n{head}Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n"
            ).encode()
            + body
            + b"\r\n0\r\n\r\n"
        )
    elif variant == "http10":
        request = f"POST {path} HTTP/1.0\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
        request += body
    elif variant == "percent":
        encoded = path.replace("events", "%65vents")
        request = f"POST {encoded} HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        request = request.encode() + body
    elif variant == "duplicate_length":
        n = len(body)
        request = (
            f"POST {path} HTTP/1.1\r\n{head}Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n"
        )
        request = request.encode() + body
        expected = 400
    elif variant == "bad_length":
        request = f"POST {path} HTTP/1.1\r\n{head}Content-Length: +{len(body)}\r\n\r\n"
        request = request.encode() + body
        expected = 400
    else:  # a head longer than the fast front reads: aiohttp refuses it, however it is split
        request = f"POST {path} HTTP/1.1\r\n{head}X-Pad: {'p' * 20000}\r\n"
        request = (request + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        expected = 400
    response = raw_request(broker.port, request)
    assert status_of(response) == expected, response[:300]
    values = [v for _, v in fetch_all_values(broker, "events", 0)]
    assert values == ([variant.encode()] if expected == 200 else [])


def test_an_oversize_content_length_is_refused_before_the_body(broker_factory):
    """Over --max-request-bytes but under the fast front's own limit: refused from the
    Content-Length, without waiting for a body that never comes."""
    b = broker_factory(extra_args=["--max-request-bytes", "65536"])
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(
            (
                "POST /sluice/v1/topics/events/partitions/0/batches HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: {b.headers['Authorization']}\r\nContent-Length: 100000\r\n\r\n"
            ).encode()
        )
        started = time.monotonic()
        response = s.recv(65536)
    assert time.monotonic() - started < 5
    assert status_of(response) == 413
    assert json_body_of(response)["error_code"] == "REQUEST_TOO_LARGE"


def test_stop_with_idle_fast_connections_is_prompt_and_clean(broker_factory):
    b = broker_factory()
    conn = HTTPConnection("127.0.0.1", b.port, timeout=10)
    body = json.dumps({"value": {"type": "STRING", "data": "kept-alive"}}).encode()
    conn.request(
        "POST",
        f"/v3/clusters/{b.cluster_id}/topics/events/records",
        body,
        {**b.headers, "Content-Type": "application/json"},
    )
    assert conn.getresponse().status == 200
    started = time.monotonic()
    assert b.stop() == 0
    assert time.monotonic() - started < 10
    conn.close()


def _open_segment_files(broker) -> int:
    """How many of the broker's open fds are segment (.log) files."""
    fd_dir = f"/proc/{broker.pid}/fd"
    count = 0
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            if os.readlink(f"{fd_dir}/{fd}").endswith(".log"):
                count += 1
    return count


@pytest.mark.parametrize("path", ["sendfile", "copy"])
def test_fetches_close_their_segment_files(broker_factory, path):
    """Every fetch opens the segment files it serves; whether the client reads the answer,
    hangs up before it, or pipelines fetches and leaves, the broker ends up holding only the
    log's own files."""
    b = broker_factory(extra_args=["--fetch-path", path])
    auth = b.headers["Authorization"]
    for i in range(20):
        assert produce_binary(b, "events", 0, batch([b"v%d" % i * 2000]))[0] == 200
    baseline = _open_segment_files(b)
    fetch = (
        "GET /sluice/v1/topics/events/partitions/0/batches?offset=0 HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: {auth}\r\n\r\n"
    ).encode()
    for _ in range(10):  # answered and read
        status, _, body = fetch_binary(b, "events", 0, 0)
        assert status == 200 and len(decode_batches(body)) == 20
    for _ in range(10):  # the client leaves before reading
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(fetch * 5)
    # the broker may still be serving the pipelined fetches of clients that left (each opens
    # and closes the files): wait for the count to stay at the baseline for 0.5 s
    deadline = time.monotonic() + 10
    steady = 0
    while steady < 10 and time.monotonic() < deadline:
        steady = steady + 1 if _open_segment_files(b) == baseline else 0
        time.sleep(0.05)
    assert _open_segment_files(b) == baseline
    status, _, body = fetch_binary(b, "events", 0, 0)  # and the broker still serves
    assert status == 200 and len(decode_batches(body)) == 20
