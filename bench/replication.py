"""Replication benchmark: acks=all on three replicating brokers beside acks=1 on one broker,
in the same run (../shared/BENCH.md, ``produce.replicated.records_per_s``).

Both sides POST the same pre-built RecordBatch v2 bodies (16 KiB batches of 100-byte
values, one batch per request) over the same number of keep-alive connections to one
partition's leader:

- ``produce.replicated.records_per_s``: acks=all, RF 3, min ISR 2, three brokers on
  loopback (static metadata, fixed leader; followers fetch with the replica fetch).
  Peer: one broker, RF 1, acks=1. Target ratio >= 0.5.
- ``produce.replicated.p99_ms``: acks=all request latency at one connection (each request
  waits for both followers to fetch it). Peer: the same at acks=1 on the single broker.
- ``produce.forwarded.records_per_s``: the same bodies, acks=1, sent to a broker of the
  three that leads none of the partitions, which forwards each request to the leader
  (docs/data-plane-api.md, "One front door"). Peer: the same client sending to the leader
  directly, same cluster, same run. Target ratio >= 0.6.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.report import Metric
from bench.storage import make_batch
from harness.broker import BrokerLauncher
from harness.cluster import start_static_cluster

BINARY = "application/vnd.kafka.recordbatch.v2"
TOPIC = "bench"


async def _produce(url: str, headers: dict, seconds: float, connections: int) -> tuple[float, list]:
    """(records/s, per-request latencies in ms) for ``connections`` concurrent posters."""
    batch, per_batch = make_batch()
    latencies: list[float] = []

    async def loop(session: aiohttp.ClientSession, deadline: float) -> int:
        sent = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            async with session.post(url, data=batch, headers=headers) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"produce failed: {resp.status} {body[:300]!r}")
            latencies.append((time.perf_counter() - started) * 1000)
            sent += 1
        return sent

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        counts = await asyncio.gather(*(loop(session, start + seconds) for _ in range(connections)))
        elapsed = time.perf_counter() - start
    return sum(counts) * per_batch / elapsed, latencies


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def run(quick: bool = False) -> list[Metric]:
    seconds = 3.0 if quick else 10.0
    connections = 8
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-replication-"))
    launcher = BrokerLauncher(base)
    path = f"/sluice/v1/topics/{TOPIC}/partitions/0/batches"
    try:
        single = launcher(topics={TOPIC: (1, {})}, name="single")
        headers = {**single.headers, "Content-Type": BINARY}
        url = single.url + path + "?acks=1"
        single_rate, _ = asyncio.run(_produce(url, headers, seconds, connections))
        _, single_lat = asyncio.run(_produce(url, headers, seconds / 2, 1))
        single.stop()
        cluster = start_static_cluster(
            launcher, {TOPIC: (1, {"min.insync.replicas": "2"})}, leaders={TOPIC: [1]}
        )
        leader = cluster.broker(1)
        url = leader.url + path + "?acks=all"
        replicated_rate, _ = asyncio.run(_produce(url, headers, seconds, connections))
        _, replicated_lat = asyncio.run(_produce(url, headers, seconds / 2, 1))
        # one front door: broker 2 leads nothing here and forwards every request to broker 1
        direct_rate, _ = asyncio.run(
            _produce(leader.url + path + "?acks=1", headers, seconds, connections)
        )
        forwarded_rate, _ = asyncio.run(
            _produce(cluster.broker(2).url + path + "?acks=1", headers, seconds, connections)
        )
    finally:
        launcher.close()
        shutil.rmtree(base, ignore_errors=True)
    workload = (
        f"pre-built RecordBatch v2 bodies, 16 KiB batches of 100-byte values, one batch per "
        f"request, {connections} keep-alive connections, {seconds:.0f} s"
    )
    return [
        Metric(
            name="produce.replicated.records_per_s",
            value=round(replicated_rate),
            unit="records/s",
            better="higher",
            workload=f"{workload}; acks=all, RF 3, min ISR 2, three brokers on loopback",
            peer="the same bodies to one broker, RF 1, acks=1, in the same run",
            peer_value=round(single_rate),
            target_ratio=0.5,
        ),
        Metric(
            name="produce.replicated.p99_ms",
            value=round(_p99(replicated_lat), 2),
            unit="ms",
            better="lower",
            workload="one connection, one 16 KiB batch per request, acks=all, RF 3, min ISR 2",
            peer="the same at acks=1 on one broker",
            peer_value=round(_p99(single_lat), 2),
        ),
        Metric(
            name="produce.forwarded.records_per_s",
            value=round(forwarded_rate),
            unit="records/s",
            better="higher",
            workload=f"{workload}; acks=1, RF 3, every request sent to a broker that leads no "
            "partition of the topic and forwards it to the leader",
            peer="the same client and bodies sent to the leader directly, in the same run",
            peer_value=round(direct_rate),
            target_ratio=0.6,
        ),
    ]
