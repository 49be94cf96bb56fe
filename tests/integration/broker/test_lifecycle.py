"""Start, SIGTERM, kill -9 and restart; health, readiness and metrics."""

from __future__ import annotations

import re
import threading
import time

from brokernodes.storage.recovery import CLEAN_SHUTDOWN_FILE
from tests.integration.broker.util import batch, fetch_all_values, produce_binary, produce_json


def test_restart_after_kill_9_serves_every_acknowledged_record(broker):
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
    lock = threading.Lock()
    stop = threading.Event()

    def producer(p: int) -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            value = b"p%d-%d" % (p, i)
            try:
                status, ans = produce_binary(broker, "orders", p, batch([value, value + b"b"]))
            except OSError:
                return  # the broker died mid-request: not acknowledged
            if status != 200:
                return
            with lock:
                acked[p].append((ans["base_offset"], value))
            i += 1

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.6)
    broker.kill()
    stop.set()
    for t in threads:
        t.join(10)
    assert all(acked.values()), acked
    broker.start()
    for p, records in acked.items():
        got = dict(fetch_all_values(broker, "orders", p))
        for offset, value in records:
            assert got[offset] == value
            assert got[offset + 1] == value + b"b"
    # and it takes new writes after the last surviving offset
    status, ans = produce_binary(broker, "orders", 0, batch([b"after"]))
    assert status == 200 and ans["base_offset"] >= acked[0][-1][0] + 2


def test_kill_9_while_rolled_segments_are_being_fsynced(broker_factory):
    """Small segments, so nearly every append rolls one and a flusher thread fsyncs it while
    produces go on (the recovery point trails the log end by several segments): after kill
    -9 the restart recovers every segment past the recovery point, and serves every
    acknowledged record in order."""
    b = broker_factory({"rolls": (1, {"segment.bytes": "4096"})})
    acked: list[tuple[int, bytes]] = []
    for i in range(300):
        value = b"r%04d-" % i + b"x" * 1500
        status, ans = produce_binary(b, "rolls", 0, batch([value]))
        assert status == 200, ans
        acked.append((ans["base_offset"], value))
    segments = list((b.data_dir / "rolls-0").glob("*.log"))
    assert len(segments) > 100
    b.kill()
    b.start()
    got = fetch_all_values(b, "rolls", 0)
    assert got == acked
    status, ans = produce_binary(b, "rolls", 0, batch([b"after"]))
    assert status == 200 and ans["base_offset"] == 300


def test_sigterm_closes_cleanly_and_restart_keeps_data(broker):
    assert produce_binary(broker, "events", 0, batch([b"one", b"two"]))[0] == 200
    assert produce_json(broker, "orders", {"partition_id": 1, "value": {"data": 3}})[0] == 200
    assert broker.stop() == 0
    for name in ("events-0", "orders-0", "orders-1", "orders-2"):
        assert (broker.data_dir / name / CLEAN_SHUTDOWN_FILE).exists(), name
    assert "stopped cleanly" in broker.output()
    broker.start()
    assert fetch_all_values(broker, "events", 0) == [(0, b"one"), (1, b"two")]
    assert fetch_all_values(broker, "orders", 1) == [(0, b"3")]
    # the marker is consumed by the open
    assert not (broker.data_dir / "events-0" / CLEAN_SHUTDOWN_FILE).exists()


def test_sigterm_finishes_a_waiting_long_poll(broker):
    result = {}

    def poll():
        from tests.integration.broker.util import fetch_binary

        result["resp"] = fetch_binary(broker, "events", 0, 0, max_wait_ms=20000)

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert broker.stop() == 0
    assert time.monotonic() - started < 5
    t.join(5)
    assert result["resp"][0] == 200 and result["resp"][2] == b""


def _metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_move(broker):
    def scrape() -> str:
        status, headers, body = broker.request("GET", "/metrics", auth=False)
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        return body.decode()

    before = scrape()
    body = batch([b"x" * 100] * 10)
    assert produce_binary(broker, "events", 0, body)[0] == 200
    assert produce_json(broker, "events", {"value": {"data": "hello"}})[0] == 200
    fetch_all_values(broker, "events", 0)
    broker.json("GET", "/sluice/v1/topics/events/partitions/0/records?offset=0")
    after = scrape()
    assert _metric(after, "sluice_records_in_total", topic="events") == 11
    assert _metric(after, "sluice_bytes_in_total", topic="events") > len(body)
    assert _metric(after, "sluice_bytes_out_total", topic="events") >= 2 * len(body)
    assert _metric(after, "sluice_records_out_total", topic="events") == 11
    assert _metric(after, "sluice_log_end_offset", topic="events", partition="0") == 11
    assert _metric(before, "sluice_log_end_offset", topic="events", partition="0") == 0
    assert _metric(after, "sluice_active_connections") >= 1
    assert re.search(r'sluice_request_seconds_count\{endpoint="produce_binary"\} 1\.0', after)
    assert re.search(r'sluice_request_seconds_bucket\{endpoint="fetch_binary",le=', after)


def test_readyz_and_bad_metadata(broker_factory, tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster_id": "x"}')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "brokernodes",
            "--config",
            str(bad),
            "--data-dir",
            str(tmp_path / "d"),
            "--port",
            "1",
        ],
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 2 and b"broker_id" in proc.stderr
