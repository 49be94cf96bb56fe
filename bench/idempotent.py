"""``produce.idempotent.records_per_s``: producers as a user's idempotent producers are, not
one batch resent (``produce.prebuilt`` is the broker's ingest ceiling).

``PRODUCERS`` processes, each with its own producer id (``POST /sluice/v1/producer-ids``,
the HTTP form of InitProducerId), send pre-encoded 16 KiB RecordBatch v2 bodies of 100-byte
values round-robin over ``PARTITIONS`` partitions, acks=1, on one pipelined keep-alive
connection each (bench/pipelined.py, ``DEPTH`` requests per write). Every request's batch
carries the producer's next sequence for its partition: the batch is encoded once and, per
request, its base sequence is rewritten and its CRC-32C recomputed (``BatchRebuilder``), so
the broker checks and records real sequences. A duplicate or gap would be refused
(OUT_OF_ORDER_SEQUENCE_NUMBER) and fail the run.

Peer: ``redis-benchmark`` XADD of 100-byte values with as many clients as producers,
``-P 64``; alternating rounds, the median round of each side. ``SLUICE_BENCH_SMOKE=1``
shrinks it to seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from crc32c import crc32c

from bench import pipelined, redis_peer
from bench.report import Metric
from bench.smoke import smoke
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.header import ATTRIBUTES_AT, CRC_AT

REPO = Path(__file__).resolve().parents[1]
TOPIC = "idem"
PRODUCERS = 4
PARTITIONS = 4
DEPTH = 4
BATCH_BYTES = 16 * 1024
VALUE_BYTES = 100
BASE_SEQUENCE_AT = 53
INT32_MAX = 2**31 - 1
AUTH_ENV = "SLUICE_BENCH_AUTHORIZATION"  # the producers' Authorization header


def _records() -> list[Record]:
    now = int(time.time() * 1000)
    records = []
    size = 61
    i = 0
    while True:
        record = Record(now, b"key-%06d" % i, b"v" * VALUE_BYTES)
        size += 1 + 1 + 1 + 2 + 1 + len(record.key) + 1 + VALUE_BYTES + 1 + 2
        if size > BATCH_BYTES:
            return records
        records.append(record)
        i += 1


class BatchRebuilder:
    """One pre-encoded batch of a producer, re-stamped per request: ``next(partition)``
    returns the batch with that partition's next base sequence and a matching CRC."""

    def __init__(self, producer_id: int, producer_epoch: int, partitions: int) -> None:
        records = _records()
        self.records = len(records)
        self.template = bytearray(
            encode_batch(
                records,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=0,
            )
        )
        self.sequences = [0] * partitions

    def next(self, partition: int) -> bytes:
        sequence = self.sequences[partition]
        self.sequences[partition] = (sequence + self.records) % (INT32_MAX + 1)
        buf = self.template
        buf[BASE_SEQUENCE_AT : BASE_SEQUENCE_AT + 4] = sequence.to_bytes(4, "big")
        buf[CRC_AT:ATTRIBUTES_AT] = crc32c(memoryview(buf)[ATTRIBUTES_AT:]).to_bytes(4, "big")
        return bytes(buf)


def producer_id(port: int, authorization: str) -> tuple[int, int]:
    """A fresh (producer id, epoch) from the broker's HTTP InitProducerId."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/sluice/v1/producer-ids",
        method="POST",
        headers={"Authorization": authorization},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        body = json.loads(resp.read())
    return body["producer_id"], body["producer_epoch"]


def produce_worker(port: int, authorization: str, start_at: float, seconds: float) -> dict:
    """One producer process: its own id, one pipelined connection, round-robin partitions."""
    pid, epoch = producer_id(port, authorization)
    rebuilder = BatchRebuilder(pid, epoch, PARTITIONS)
    length = len(rebuilder.template)
    heads = [
        pipelined.request_head(
            port, f"/sluice/v1/topics/{TOPIC}/partitions/{p}/batches?acks=1", authorization, length
        )
        for p in range(PARTITIONS)
    ]
    turn = [pid % PARTITIONS]

    def source(depth: int) -> bytes:
        parts = []
        for _ in range(depth):
            p = turn[0]
            turn[0] = (p + 1) % PARTITIONS
            parts.append(heads[p])
            parts.append(rebuilder.next(p))
        return b"".join(parts)

    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    start = time.monotonic()
    result = pipelined.run(port, [source], DEPTH, seconds)
    return {
        "records": result.requests * rebuilder.records,
        "start": start,
        "end": start + result.seconds,
        "cpu_s": result.client_cpu_s,
        "producer_id": pid,
    }


def _round(broker, seconds: float) -> tuple[float, float, int]:
    """``PRODUCERS`` processes from one common start; (records/s, their CPU s summed,
    records acknowledged)."""
    start_at = time.monotonic() + 1.0  # to import and fetch a producer id first
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.idempotent",
                str(broker.port),
                repr(start_at),
                repr(seconds),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, AUTH_ENV: broker.headers["Authorization"]},
        )
        for _ in range(PRODUCERS)
    ]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=seconds + 120)
            if proc.returncode != 0:
                raise RuntimeError(f"an idempotent producer failed: {err[-3000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    if len({r["producer_id"] for r in results}) != PRODUCERS:
        raise RuntimeError("two producer processes got the same producer id")
    records = sum(r["records"] for r in results)
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    return records / elapsed, sum(r["cpu_s"] for r in results), records


def run(quick: bool = False) -> list[Metric]:
    from bench.broker import cpu_seconds, start_broker

    rounds, seconds, redis_requests = (3, 1.0, 800_000) if quick else (5, 3.0, 2_500_000)
    if smoke():
        rounds, seconds, redis_requests = 1, 0.5, 50_000
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-idempotent-"))
    sluice: list[float] = []
    redis_rates: list[float] = []
    client_busy: list[float] = []
    broker_us: list[float] = []  # broker CPU per record
    try:
        broker = start_broker(base / "b", {TOPIC: (PARTITIONS, {})})
        try:
            with redis_peer.redis_server() as port:
                _round(broker, 0.5)  # warm
                for _ in range(rounds):
                    redis_rates.append(
                        redis_peer.benchmark_xadd(port, redis_requests, clients=PRODUCERS)
                    )
                    before = cpu_seconds(broker.pid)
                    rate, cpu, records = _round(broker, seconds)
                    broker_us.append((cpu_seconds(broker.pid) - before) / records * 1e6)
                    sluice.append(rate)
                    client_busy.append(cpu / seconds)
        finally:
            broker.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    each = ", ".join(
        f"{s / 1000:.0f}k vs {r / 1000:.0f}k" for s, r in zip(sluice, redis_rates, strict=True)
    )
    return [
        Metric(
            name="produce.idempotent.records_per_s",
            value=round(statistics.median(sluice)),
            unit="records/s",
            better="higher",
            workload=(
                f"{PRODUCERS} producer processes, each with its own producer id (POST "
                f"/sluice/v1/producer-ids) and one pipelined keep-alive connection ({DEPTH} "
                f"requests per write), 16 KiB RecordBatch v2 bodies of 100-byte values "
                f"carrying each partition's next sequence (re-stamped and CRC'd per "
                f"request), round-robin over {PARTITIONS} partitions, acks=1, one broker; "
                f"median of {rounds} rounds of {seconds:g} s alternating with the peer; "
                f"the producers' CPU "
                f"{statistics.median(client_busy):.0%} of a core together, the broker's "
                f"CPU {statistics.median(broker_us):.2f} us per record (medians)"
            ),
            peer=(
                f"redis-benchmark XADD 100-byte values -P 64 -c {PRODUCERS} (as many clients "
                f"as producers), {redis_requests:,} commands per round, each round just "
                f"before Sluice's; median of the rounds"
            ),
            peer_value=round(statistics.median(redis_rates)),
            rounds=f"records/s, Sluice vs Redis: {each}",
        )
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idempotent")
    parser.add_argument("port", type=int)
    parser.add_argument("start_at", type=float)
    parser.add_argument("seconds", type=float)
    a = parser.parse_args(argv)
    out = produce_worker(a.port, os.environ[AUTH_ENV], a.start_at, a.seconds)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
