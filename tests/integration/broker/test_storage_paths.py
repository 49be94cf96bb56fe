"""Large zero-copy fetches under both loops, and the background retention and compaction."""

from __future__ import annotations

import json
import socket
import time

import pytest

from brokernodes.records.batch import decode_batches
from tests.integration.broker.util import batch, fetch_binary, produce_binary, produce_json


@pytest.mark.parametrize(
    ("loop", "path"), [("uvloop", "sendfile"), ("asyncio", "sendfile"), ("uvloop", "copy")]
)
def test_large_fetch_to_a_slow_reader_is_exact(broker_factory, loop, path):
    b = broker_factory(
        {"big": (1, {"segment.bytes": str(3 * 1024 * 1024)})},
        extra_args=["--loop", loop, "--fetch-path", path, "--no-fsync"],
    )
    sent = bytearray()
    for i in range(8):  # 8 MiB over three segment files
        body = batch([bytes([i]) * 1024] * 1000)
        status, _ans = produce_binary(b, "big", 0, body)
        assert status == 200
        sent += body[16:]
    # a reader that lets the socket buffer fill, so the broker meets EAGAIN
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(
            (
                "GET /sluice/v1/topics/big/partitions/0/batches?offset=0&max_bytes=16777216 "
                f"HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {b.api_key}\r\n\r\n"
            ).encode()
        )
        data = bytearray()
        time.sleep(0.3)
        head_end = -1
        length = None
        while length is None or len(data) < head_end + 4 + length:
            chunk = s.recv(1 << 20)
            assert chunk, "connection closed early"
            data += chunk
            if head_end < 0 and (head_end := data.find(b"\r\n\r\n")) >= 0:
                head = bytes(data[:head_end]).decode()
                length = int(head.lower().split("content-length: ")[1].split("\r\n")[0])
        body = bytes(data[head_end + 4 :])
        assert len(body) == length
    got = bytearray()
    pos = 0
    for bb in decode_batches(body):
        got += body[pos + 16 : pos + bb.header.size]
        pos += bb.header.size
    assert got == sent
    # the connection is reusable and the broker still answers
    status, _, more = fetch_binary(b, "big", 0, 7000)
    assert status == 200 and more


def test_retention_moves_the_log_start(broker_factory):
    b = broker_factory(
        {"short": (1, {"segment.bytes": "2048", "retention.bytes": "4096"})},
        extra_args=["--housekeeping-interval-ms", "200"],
    )
    for i in range(30):
        assert produce_binary(b, "short", 0, batch([b"%d" % i + b"r" * 400]))[0] == 200
    path = "/sluice/v1/topics/short/partitions/0/offsets?timestamp=earliest"
    deadline = time.monotonic() + 10
    while b.json("GET", path)[1]["offset"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    start = b.json("GET", path)[1]["offset"]
    assert 0 < start < 30
    status, err = b.json("GET", "/sluice/v1/topics/short/partitions/0/batches?offset=0")
    assert status == 416 and err["log_start_offset"] == start
    status, _, body = fetch_binary(b, "short", 0, start)
    assert status == 200 and decode_batches(body)[0].header.base_offset == start


def test_compaction_keeps_the_latest_value_per_key(broker_factory):
    b = broker_factory(
        {
            "table": (
                1,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": "1024",
                    "min.cleanable.dirty.ratio": "0.01",
                },
            )
        },
        extra_args=["--housekeeping-interval-ms", "200"],
    )
    for round_ in range(10):
        for k in ("a", "b", "c"):
            status, _ = produce_json(
                b,
                "table",
                {
                    "key": {"type": "STRING", "data": k},
                    "value": {"type": "JSON", "data": {"k": k, "round": round_, "pad": "x" * 80}},
                },
            )
            assert status == 200
    path = "/sluice/v1/topics/table/partitions/0/records?offset=0&max_records=1000"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        records = b.json("GET", path)[1]["records"]
        if len(records) < 30:
            break
        time.sleep(0.1)
    assert len(records) < 30
    latest = {}
    for r in records:
        latest[r["key"]] = r["value"]["round"]
    assert latest == {"a": 9, "b": 9, "c": 9}
    offsets = [r["offset"] for r in records]
    assert offsets == sorted(offsets) and offsets[-1] == 29
    assert json.dumps(records)  # still valid JSON records
