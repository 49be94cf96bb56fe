"""``produce.durable.records_per_s``: produce as a user asking for durability configures it,
every acknowledged record fsynced before its acknowledgement.

Sluice: one broker, a partition with ``flush.messages=1`` (an append that reaches the policy
fsyncs before it returns: brokernodes/storage/log_flush.py), acks=all, the pre-built
produce's client and bodies (bench/pipelined.py: 8 connections, 4 16 KiB batches of
100-byte values per write). Peer: Redis with ``appendfsync always`` (every write command in
the append-only file and fsynced before its reply), ``redis-benchmark`` XADD of 100-byte
values with the same client shape: as many connections, each with as many records per
write as Sluice's carries. Alternating rounds, the median round of each side; both on the
same disk (a temporary directory). ``SLUICE_BENCH_SMOKE=1`` shrinks it to seconds.

Redis's ``always`` fsyncs once per event-loop turn for every command read in that turn, a
group commit of its own; a Sluice partition shares one fsync among the produce requests
waiting for it (docs/storage.md, group commit), and a pipelining connection's binary produces
wait for it together (docs/data-plane-api.md, the lean front).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench import redis_peer
from bench.report import Metric
from bench.smoke import smoke

TOPIC = "bench"  # bench.broker.prebuilt_run's topic


def _redis_round(port: int, requests: int, clients: int, per_write: int) -> float:
    return redis_peer.benchmark_xadd(port, requests, pipeline=per_write, clients=clients)


def run(quick: bool = False) -> list[Metric]:
    from bench.broker import (
        PREBUILT_CONNECTIONS,
        PREBUILT_DEPTH,
        cpu_seconds,
        prebuilt_run,
        start_broker,
    )
    from bench.storage import make_batch

    rounds, seconds, redis_requests = (3, 1.0, 100_000) if quick else (5, 3.0, 400_000)
    if smoke():
        rounds, seconds, redis_requests = 1, 0.5, 20_000
    per_write = PREBUILT_DEPTH * make_batch()[1]
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-durable-"))
    sluice: list[float] = []
    redis_rates: list[float] = []
    client_busy: list[float] = []
    broker_busy: list[float] = []
    try:
        broker = start_broker(base / "b", {TOPIC: (1, {"flush.messages": "1"})})
        try:
            with redis_peer.redis_server(appendfsync="always") as port:
                prebuilt_run(broker, 0.5, PREBUILT_CONNECTIONS, PREBUILT_DEPTH, acks="all")
                for _ in range(rounds):
                    redis_rates.append(
                        _redis_round(port, redis_requests, PREBUILT_CONNECTIONS, per_write)
                    )
                    before, wall = cpu_seconds(broker.pid), time.monotonic()
                    rate, result = prebuilt_run(
                        broker, seconds, PREBUILT_CONNECTIONS, PREBUILT_DEPTH, acks="all"
                    )
                    used = cpu_seconds(broker.pid) - before
                    broker_busy.append(used / (time.monotonic() - wall))
                    sluice.append(rate)
                    client_busy.append(result.client_busy)
        finally:
            broker.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    each = ", ".join(
        f"{s / 1000:.0f}k vs {r / 1000:.0f}k" for s, r in zip(sluice, redis_rates, strict=True)
    )
    return [
        Metric(
            name="produce.durable.records_per_s",
            value=round(statistics.median(sluice)),
            unit="records/s",
            better="higher",
            workload=(
                f"acks=all, flush.messages=1 (every acknowledged record fsynced first), one "
                f"broker, one partition; {PREBUILT_CONNECTIONS} pipelined keep-alive "
                f"connections (bench/pipelined.py), {PREBUILT_DEPTH} pre-built 16 KiB "
                f"batches of 100-byte values per write; median of {rounds} rounds of "
                f"{seconds:g} s alternating with the peer; the client's CPU "
                f"{statistics.median(client_busy):.0%} of a core, "
                f"the broker's {statistics.median(broker_busy):.0%} (medians)"
            ),
            peer=(
                f"Redis appendonly yes, appendfsync always, redis-benchmark XADD 100-byte "
                f"values -c {PREBUILT_CONNECTIONS} -P {per_write} (as many records per write "
                f"as Sluice's connections carry), {redis_requests:,} commands per round, "
                f"each round just before Sluice's; median of the rounds"
            ),
            peer_value=round(statistics.median(redis_rates)),
            target_ratio=2.0,
            rounds=f"records/s, Sluice vs Redis: {each}",
        )
    ]
