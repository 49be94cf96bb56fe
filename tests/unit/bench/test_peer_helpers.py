"""The pure parts of the peer benchmarks: the idempotent producers' re-stamped batches, the
pipelined client against a loopback HTTP server, the Redis e2e peer's stamps and pacing,
the NATS publisher's commands and ack counting, and the replication CPU ratio."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from bench import nats_peer, pipelined, redis_e2e, replication
from bench.idempotent import BatchRebuilder
from brokernodes.records.batch import decode_batch


def test_rebuilt_batches_carry_each_partition_s_next_sequence_with_a_valid_crc():
    rebuilder = BatchRebuilder(producer_id=4242, producer_epoch=3, partitions=2)
    n = rebuilder.records
    seen = {0: [], 1: []}
    for partition in (0, 1, 0, 0, 1):
        batch = decode_batch(rebuilder.next(partition))  # raises on a bad CRC
        assert batch.header.producer_id == 4242
        assert batch.header.producer_epoch == 3
        assert len(batch.records) == n
        seen[partition].append(batch.header.base_sequence)
    assert seen == {0: [0, n, 2 * n], 1: [0, n]}


def test_sequences_wrap_past_int32_max_as_kafka_s_do():
    rebuilder = BatchRebuilder(producer_id=1, producer_epoch=0, partitions=1)
    rebuilder.sequences[0] = 2**31 - 1
    assert decode_batch(rebuilder.next(0)).header.base_sequence == 2**31 - 1
    assert rebuilder.sequences[0] == rebuilder.records - 1


def test_request_head_names_path_length_and_binary_type():
    head = pipelined.request_head(9000, "/x?acks=1", "Bearer k", 17)
    assert head.startswith(b"POST /x?acks=1 HTTP/1.1\r\n")
    assert b"Content-Length: 17\r\n" in head
    assert b"Content-Type: application/vnd.kafka.recordbatch.v2\r\n" in head
    assert head.endswith(b"\r\n\r\n")
    assert pipelined.fixed(b"ab")(3) == b"ababab"


def _answering_server(status: bytes) -> tuple[socket.socket, threading.Thread, list[int]]:
    """A loopback server that answers every ``GET`` request line with ``status`` and a
    2-byte body, split into small writes so answers straddle reads."""
    server = socket.create_server(("127.0.0.1", 0))
    requests = [0]

    def serve() -> None:
        with contextlib.suppress(OSError):  # the client closed first (the error test does)
            answer_all()

    def answer_all() -> None:
        conn, _ = server.accept()
        with conn:
            pending = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                pending += data
                n = pending.count(b"GET ")
                pending = pending[pending.rfind(b"GET ") + 4 :] if n else pending
                requests[0] += n
                answer = b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok"
                for _ in range(n):
                    conn.sendall(answer[:10])
                    conn.sendall(answer[10:])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread, requests


def test_pipelined_run_reads_every_answer_and_reports_its_cpu():
    server, thread, requests = _answering_server(b"200 OK")
    try:
        port = server.getsockname()[1]
        latencies: list[float] = []
        result = pipelined.run(port, [pipelined.fixed(b"GET / x\r\n")], 4, 0.2, latencies=latencies)
    finally:
        server.close()
    thread.join(5)
    assert result.requests > 0
    assert result.requests % 4 == 0
    assert result.requests == requests[0]
    assert len(latencies) == result.requests // 4
    assert 0 <= result.client_busy <= 1.5


def test_pipelined_run_fails_on_an_error_answer():
    server, thread, _ = _answering_server(b"400 Bad Request")
    try:
        with pytest.raises(RuntimeError, match="produce failed"):
            pipelined.run(server.getsockname()[1], [pipelined.fixed(b"GET / x\r\n")], 2, 0.2)
    finally:
        server.close()
    thread.join(5)


def test_redis_e2e_stamps_measure_only_timed_records():
    value = redis_e2e.stamp(b"m", 1_000_000)
    assert len(value) == 100
    assert redis_e2e.latency_ms(value, 3_500_000) == 2.5
    assert redis_e2e.latency_ms(redis_e2e.stamp(b"w", 0), 10**9) is None


def test_redis_e2e_pacing_sends_the_first_record_at_once_and_stops_at_the_total():
    assert redis_e2e.due(0.0, 10_000, 50) == 1
    assert redis_e2e.due(0.0011, 10_000, 50) == 12
    assert redis_e2e.due(10.0, 10_000, 50) == 50


def test_redis_e2e_summary():
    s = redis_e2e.summary([float(i) for i in range(1, 201)])
    assert s["received"] == 200
    assert s["p50_ms"] == 100.5
    assert 198 <= s["p99_ms"] <= 200
    assert redis_e2e.summary([]) == {"received": 0}


def test_nats_pub_commands_and_ack_counting():
    cmds = nats_peer.pub_commands(b"bench.p", b"_INBOX.x", b"abc", 2)
    assert cmds == b"PUB bench.p _INBOX.x 3\r\nabc\r\n" * 2
    ack = b'MSG _INBOX.x 1 28\r\n{"stream":"BENCH","seq":17}\r\n'
    assert nats_peer.count_acks(ack * 3) == (3, False)
    bad = b'MSG _INBOX.x 1 40\r\n{"error":{"code":503,"description":"x"}}\r\n'
    assert nats_peer.count_acks(ack + bad) == (2, True)
    assert nats_peer.count_acks(b"-ERR 'Authorization Violation'\r\n")[1] is True


def test_replication_cpu_ratio_and_p99():
    assert replication.cpu_ratio(9.0, 3.0) == 3.0
    assert replication.p99([float(i) for i in range(100)]) == 99.0
    assert replication.p99([5.0]) == 5.0


def test_the_delay_proxy_process_adds_about_its_delay_to_a_round_trip():
    """The fault suite's LinkProxy in bench/delay_proxy.py's process, on its fine-timer
    loop: 2 ms each way adds at least 4 ms to an HTTP round trip, 0 ms far less."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from bench.delay_proxy import DelayProxies, measure_rtt_ms

    class Healthz(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            # one write: a head and a body written apart wait on Nagle and delayed ACKs
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        direct = measure_rtt_ms(port, samples=10)
        with DelayProxies(0.002, [port]) as proxies:
            delayed = measure_rtt_ms(proxies.ports[port], samples=10)
    finally:
        server.shutdown()
        server.server_close()
    assert delayed - direct >= 3.8  # two 2 ms sleeps, less the proxy-free hop's noise
    assert delayed - direct < 100.0
