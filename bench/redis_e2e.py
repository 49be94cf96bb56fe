"""The Redis peer of ``e2e.p99_ms``, treated as Sluice's client is: a producer process and a
consumer process of their own (redis-py with the hiredis parser), a warm-up before the
clock, then ``gc.collect(); gc.freeze()``, then the steady rate.

The producer sends as the SDK's e2e loop does (brokernodes/cli_bench.py): every loop turn it
stamps and sends the records due by now (one pipeline of XADDs, as the SDK hands the due
records to its sender together), then sleeps 1 ms. The consumer blocks in XREAD (COUNT 1000,
BLOCK 200). Stamps are ``time.monotonic_ns()``: CLOCK_MONOTONIC, one clock for every
process on the machine.

Order of a round (``round_p99``): the consumer starts and says ``ready``; the producer sends
``WARM_UP_RECORDS`` records and freezes its GC (``warm``); the consumer receives them and
freezes its GC (``warm``); the harness writes ``go`` to the producer, which sends
``rate * seconds`` stamped records; each process ends with one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VALUE_BYTES = 100
WARM_UP_RECORDS = 1000  # as the SDK's e2e warm-up (a record per key, up to 1000)
STEP_TIMEOUT_S = 30.0


def stamp(kind: bytes, now_ns: int) -> bytes:
    """A 100-byte value: ``kind`` (w: warm-up, m: measured), the send time, padding."""
    head = b"%s%d " % (kind, now_ns)
    return head + b"v" * (VALUE_BYTES - len(head))


def latency_ms(value: bytes, now_ns: int) -> float | None:
    """Send-to-receipt milliseconds of a measured value; None for a warm-up one."""
    if value[:1] != b"m":
        return None
    return (now_ns - int(value[1 : value.index(b" ")])) / 1e6


def due(elapsed_s: float, rate: int, total: int) -> int:
    """How many records a steady ``rate`` has sent ``elapsed_s`` after the start (the first
    one at once), at most ``total``."""
    return min(total, int(elapsed_s * rate) + 1)


def _client(port: int):
    import redis
    from redis.utils import HIREDIS_AVAILABLE

    if not HIREDIS_AVAILABLE:
        raise RuntimeError("hiredis is not installed: the peer would parse replies in Python")
    client = redis.Redis(port=port)
    client.ping()
    return client


def _settle_gc() -> None:
    # the SDK's e2e does the same once warm: long-lived objects out of the collector's way
    gc.collect()
    gc.freeze()


def produce(port: int, key: str, rate: int, seconds: float) -> dict:
    client = _client(port)
    pipe = client.pipeline(transaction=False)
    for _ in range(WARM_UP_RECORDS):
        pipe.xadd(key, {"v": stamp(b"w", time.monotonic_ns())})
    pipe.execute()
    _settle_gc()
    print("warm", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise RuntimeError("the harness did not say go")
    total = int(rate * seconds)
    sent = 0
    started = time.perf_counter()
    while sent < total:
        target = due(time.perf_counter() - started, rate, total)
        if target > sent:
            pipe = client.pipeline(transaction=False)
            while sent < target:
                pipe.xadd(key, {"v": stamp(b"m", time.monotonic_ns())})
                sent += 1
            pipe.execute()
        time.sleep(0.001)
    return {"sent": sent, "seconds": time.perf_counter() - started}


def consume(port: int, key: str, count: int, timeout: float) -> dict:
    client = _client(port)
    print("ready", flush=True)
    last_id = "0-0"
    warm = 0
    latencies: list[float] = []
    deadline = time.monotonic() + timeout
    while len(latencies) < count and time.monotonic() < deadline:
        reply = client.xread({key: last_id}, count=1000, block=200)
        now = time.monotonic_ns()
        for _, entries in reply or []:
            for entry_id, fields in entries:
                last_id = entry_id
                ms = latency_ms(fields[b"v"], now)
                if ms is None:
                    warm += 1
                    if warm == WARM_UP_RECORDS:
                        _settle_gc()
                        print("warm", flush=True)
                else:
                    latencies.append(ms)
    return summary(latencies)


def summary(latencies: list[float]) -> dict:
    """Count, p50, p99 and max of latencies in ms (p99 is the max below 100 samples)."""
    if not latencies:
        return {"received": 0}
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 100 else None
    return {
        "received": len(latencies),
        "p50_ms": statistics.median(latencies),
        "p99_ms": cuts[98] if cuts else max(latencies),
        "max_ms": max(latencies),
    }


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.redis_e2e", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _expect(proc: subprocess.Popen, word: str, who: str) -> None:
    ready, _, _ = select.select([proc.stdout], [], [], STEP_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != word:
        proc.kill()
        raise RuntimeError(f"the Redis e2e {who} did not say {word}: {line!r}")


def _result(proc: subprocess.Popen, who: str, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the Redis e2e {who} failed: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def round_latencies(port: int, key: str, rate: int, seconds: float) -> dict:
    """One round (module docstring); the consumer's summary."""
    count = int(rate * seconds)
    timeout = 4 * seconds + STEP_TIMEOUT_S
    consumer = _spawn("consume", str(port), key, str(count), repr(timeout))
    producer = None
    try:
        _expect(consumer, "ready", "consumer")
        producer = _spawn("produce", str(port), key, str(rate), repr(seconds))
        _expect(producer, "warm", "producer")
        _expect(consumer, "warm", "consumer")
        producer.stdin.write("go\n")
        producer.stdin.flush()
        _result(producer, "producer", timeout + 30)
        received = _result(consumer, "consumer", timeout + 30)
    finally:
        for proc in (consumer, producer):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    if received["received"] != count:
        raise RuntimeError(f"Redis e2e: {received['received']} of {count} records received")
    return received


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_e2e")
    parser.add_argument("role", choices=("produce", "consume"))
    parser.add_argument("port", type=int)
    parser.add_argument("key")
    parser.add_argument("number", type=int)  # rate (produce) or count (consume)
    parser.add_argument("seconds", type=float)  # duration (produce) or timeout (consume)
    a = parser.parse_args(argv)
    if a.role == "produce":
        out = produce(a.port, a.key, a.number, a.seconds)
    else:
        out = consume(a.port, a.key, a.number, a.seconds)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
