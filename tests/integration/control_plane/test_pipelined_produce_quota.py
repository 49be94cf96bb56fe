"""A tenant pipelining binary produce requests on one HTTP connection (they run
concurrently on the broker) is still held at its byte-rate quota: its answers carry
``throttle_time_ms`` and arrive no sooner than that, and what it gets appended over the run
stays within the quota's window, as one request at a time would."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse

from brokernodes.records.batch import Record, encode_batch
from harness.control_plane import ControlPlane, StaffSession, create_topic

QUOTA = 20_000  # bytes/s
WINDOW_S = 11.0  # 11 samples of 1 s, as Kafka measures the rate
DEPTH = 8  # requests per write
LOAD_SECONDS = 6.0


def _answers(sock: socket.socket, count: int) -> list[tuple[int, dict]]:
    buf = bytearray()
    out: list[tuple[int, dict]] = []
    while len(out) < count:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(buf[:end]).decode("latin-1")
            length = int(head.lower().split("content-length:")[1].split("\r\n")[0])
            if len(buf) >= end + 4 + length:
                body = json.loads(bytes(buf[end + 4 : end + 4 + length]))
                del buf[: end + 4 + length]
                out.append((int(head.split(" ")[1]), body))
                continue
        chunk = sock.recv(65536)
        assert chunk, "the broker closed the connection"
        buf += chunk
    return out


def test_a_pipelining_tenant_is_held_at_its_quota(control_plane: ControlPlane):
    cp = control_plane
    alpha = cp.tenant("alpha")
    broker = cp.start_broker(1)
    create_topic(cp, broker, "piped", alpha["api_key"])
    StaffSession(cp).set_quota("alpha", produce_bytes_per_sec=QUOTA)
    time.sleep(1.0)  # the broker's long poll delivers the quota within milliseconds
    body = encode_batch([Record(int(time.time() * 1000), None, b"x" * 4_000)])
    u = urllib.parse.urlsplit(broker.url)
    request = (
        f"POST /sluice/v1/topics/piped/partitions/0/batches HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {alpha['api_key']}\r\n"
        f"Content-Type: application/vnd.kafka.recordbatch.v2\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    accepted = 0
    throttled: list[tuple[float, int]] = []  # (seconds the write waited, its largest throttle)
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        start = time.monotonic()
        while time.monotonic() - start < LOAD_SECONDS:
            sent = time.monotonic()
            s.sendall(request * DEPTH)
            answers = _answers(s, DEPTH)
            waited = time.monotonic() - sent
            assert [a[0] for a in answers] == [200] * DEPTH, answers[0]
            offsets = [a[1]["base_offset"] for a in answers]
            assert offsets == list(range(offsets[0], offsets[0] + DEPTH))  # in order
            accepted += DEPTH * len(body)
            worst = max(a[1]["throttle_time_ms"] for a in answers)
            if worst:
                throttled.append((waited, worst))
        elapsed = time.monotonic() - start
    assert throttled, "a tenant far over its quota was never throttled"
    for waited, worst in throttled:  # each answer held back by its throttle
        assert waited >= worst / 1000 - 0.05, (waited, worst)
    # unthrottled, this loop would append megabytes; held at the quota it gets about a
    # window's worth plus the quota's rate over the run (and the last write's requests)
    assert accepted <= QUOTA * (WINDOW_S + elapsed) + DEPTH * len(body), (accepted, elapsed)
