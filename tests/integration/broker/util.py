"""Helpers for broker integration tests: batches, fetch parsing, raw sockets."""

from __future__ import annotations

import json
import socket
import time

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.records.header import iter_batches

BINARY = "application/vnd.kafka.recordbatch.v2"


def batch(values, *, key=None, ts=None, **kw) -> bytes:
    """One batch of ``values`` (bytes), all with ``key``."""
    ts = int(time.time() * 1000) if ts is None else ts
    return encode_batch([Record(ts, key, v) for v in values], **kw)


def produce_binary(broker, topic, partition, body: bytes, acks="1"):
    status, _, data = broker.request(
        "POST",
        f"/sluice/v1/topics/{topic}/partitions/{partition}/batches?acks={acks}",
        body,
        headers={"Content-Type": BINARY},
    )
    return status, (json.loads(data) if data else {})


def fetch_binary(broker, topic, partition, offset, **params):
    query = "&".join(f"{k}={v}" for k, v in {"offset": offset, **params}.items())
    return broker.request(
        "GET", f"/sluice/v1/topics/{topic}/partitions/{partition}/batches?{query}"
    )


def fetch_all_values(broker, topic, partition, offset=0) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from ``offset`` to the high watermark."""
    out = []
    for _ in range(1000):
        status, _headers, body = fetch_binary(broker, topic, partition, offset)
        assert status == 200, body
        if not body:
            return out
        for b in decode_batches(body):
            for r in b.records:
                if r.offset >= offset:
                    out.append((r.offset, r.value))
            offset = b.header.next_offset
    raise AssertionError("fetch did not reach the end")


def produce_json(broker, topic, record, cluster=None, query=""):
    cluster = cluster or broker.cluster_id
    return broker.json("POST", f"/v3/clusters/{cluster}/topics/{topic}/records{query}", record)


def fetch_json(broker, topic, partition, offset, **params):
    query = "&".join(f"{k}={v}" for k, v in {"offset": offset, **params}.items())
    return broker.json("GET", f"/sluice/v1/topics/{topic}/partitions/{partition}/records?{query}")


def headers_of(body: bytes):
    return list(iter_batches(body))


def raw_request(port: int, data: bytes, *, timeout: float = 10.0) -> bytes:
    """Send raw bytes, read until the server closes (or ``timeout``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def json_body_of(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])
