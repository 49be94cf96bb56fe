"""Replication benchmark: acks=all on three replicating brokers beside acks=1 on one broker,
in the same run (../shared/BENCH.md, ``produce.replicated.records_per_s``).

Every side is driven by the pipelined raw-socket client of the pre-built produce
(bench/pipelined.py: 8 keep-alive connections, 4 requests per write, one pre-built 16 KiB
RecordBatch v2 of 100-byte values per request) to one partition's leader, and the client's
CPU is reported so a reader sees it is not the limit. The sides alternate rounds (the peer,
then Sluice) and each reports its median round:

- ``produce.replicated.records_per_s``: acks=all, RF 3, min ISR 2, three brokers on
  loopback (static metadata, fixed leader; followers fetch with the replica fetch).
  Peer: one broker, RF 1, acks=1. Three brokers and the client share this machine's two
  cores, so CPU alone bounds this ratio near 0.33 here (Kafka's 0.51 was three machines).
- ``produce.replicated.cpu_ratio``: what one machine can judge instead: all three brokers'
  CPU (/proc/<pid>/stat) per acknowledged record at RF 3 acks=all, over the single broker's
  per record at RF 1 acks=1. 3.0 means a follower costs exactly what the leader's append
  does; target <= 3.3.
- ``produce.replicated_delayed.records_per_s``: the same acks=all run on a second cluster
  whose broker-to-broker links pass through the fault suite's proxy adding 0.2 ms per chunk
  each way (bench/delay_proxy.py), as machines in one zone would be; its CPU ratio and the
  round trip the proxy really adds are in the workload text.
- ``produce.replicated.p99_ms``: acks=all request latency on one connection, one request at
  a time (each waits for both followers to fetch it). Peer: the same at acks=1 on one broker.
- ``produce.forwarded.records_per_s``: acks=1, every request sent to a broker of the three
  that leads none of the partitions, which forwards it to the leader (docs/data-plane-api.md,
  "One front door"). Peer: the same client sending to the leader directly.

``SLUICE_BENCH_SMOKE=1`` shrinks every part to seconds.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import pipelined
from bench.broker import PREBUILT_CONNECTIONS, PREBUILT_DEPTH, cpu_seconds
from bench.delay_proxy import DelayProxies, measure_rtt_ms
from bench.report import Metric
from bench.smoke import smoke
from bench.storage import make_batch
from harness.broker import BrokerLauncher, BrokerProcess, free_port
from harness.cluster import start_static_cluster

TOPIC = "bench"
PATH = f"/sluice/v1/topics/{TOPIC}/partitions/0/batches"
LINK_DELAY_S = 0.0002


@dataclass(frozen=True)
class Plan:
    rounds: int
    seconds: float


FULL = Plan(5, 3.0)
QUICK = Plan(3, 1.0)
SMOKE = Plan(1, 0.5)


def _plan(quick: bool) -> Plan:
    return SMOKE if smoke() else QUICK if quick else FULL


@dataclass
class Side:
    """One side's rounds: records/s, broker CPU per record (us), the client's core share."""

    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)

    def median_rate(self) -> float:
        return statistics.median(self.rates)

    def cpu_per_record_us(self) -> float:
        return statistics.median(self.cpu_us)

    def client_busy(self) -> float:
        return statistics.median(self.client)


def cpu_ratio(replicated_us: float, single_us: float) -> float:
    """Broker CPU per record at RF 3 (all brokers) over the single broker's at RF 1."""
    return replicated_us / single_us if single_us else float("nan")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def _round(
    target: BrokerProcess,
    acks: str,
    seconds: float,
    cpu_pids: list[int],
    side: Side | None = None,
    *,
    connections: int = PREBUILT_CONNECTIONS,
    depth: int = PREBUILT_DEPTH,
    latencies: list[float] | None = None,
) -> None:
    """One round of pre-built produce to ``target``; adds to ``side``: records/s, the CPU of
    ``cpu_pids`` per acknowledged record, the client's share of a core."""
    batch, per_batch = make_batch()
    head = pipelined.request_head(
        target.port, f"{PATH}?acks={acks}", target.headers["Authorization"], len(batch)
    )
    before = [cpu_seconds(pid) for pid in cpu_pids]
    result = pipelined.run(
        target.port,
        [pipelined.fixed(head + batch)] * connections,
        depth,
        seconds,
        latencies=latencies,
    )
    used = sum(cpu_seconds(pid) - b for pid, b in zip(cpu_pids, before, strict=True))
    if side is not None:
        records = result.requests * per_batch
        side.rates.append(records / result.seconds)
        side.cpu_us.append(used / records * 1e6)
        side.client.append(result.client_busy)


def _cluster_pids(cluster) -> list[int]:
    return [b.pid for b in cluster.brokers.values()]


def run(quick: bool = False) -> list[Metric]:
    plan = _plan(quick)
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-replication-"))
    launcher = BrokerLauncher(base)
    slow_launcher = BrokerLauncher(base / "delayed")  # its own directories: broker1..3 again
    topics = {TOPIC: (1, {"min.insync.replicas": "2"})}
    single_side, replicated, delayed, direct, forwarded = Side(), Side(), Side(), Side(), Side()
    single_lat: list[float] = []
    replicated_lat: list[float] = []
    proxy_cpu = 0.0
    try:
        single = launcher(topics={TOPIC: (1, {})}, name="single")
        cluster = start_static_cluster(launcher, topics, leaders={TOPIC: [1]})
        leader = cluster.broker(1)
        ports = {b: free_port() for b in (1, 2, 3)}
        with DelayProxies(LINK_DELAY_S, list(ports.values())) as proxies:
            slow = start_static_cluster(
                slow_launcher,
                topics,
                leaders={TOPIC: [1]},
                ports=ports,
                url_for=lambda viewer, b: (
                    None if viewer == b else f"http://127.0.0.1:{proxies.ports[ports[b]]}"
                ),
            )
            slow_leader = slow.broker(1)
            added_ms = measure_rtt_ms(proxies.ports[ports[1]]) - measure_rtt_ms(ports[1])
            for target, acks in ((single, "1"), (leader, "all"), (slow_leader, "all")):
                _round(target, acks, 0.5, [])  # warm: connections, followers caught up
            proxy_before = cpu_seconds(proxies.pid)
            for _ in range(plan.rounds):
                _round(single, "1", plan.seconds, [single.pid], single_side)
                _round(leader, "all", plan.seconds, _cluster_pids(cluster), replicated)
                _round(slow_leader, "all", plan.seconds, _cluster_pids(slow), delayed)
            proxy_cpu = cpu_seconds(proxies.pid) - proxy_before
        slow_seconds = plan.rounds * plan.seconds
        for _ in range(plan.rounds):
            # one request at a time on one connection: the latency of each
            one = {"connections": 1, "depth": 1}
            _round(single, "1", plan.seconds / 2, [], **one, latencies=single_lat)
            _round(leader, "all", plan.seconds / 2, [], **one, latencies=replicated_lat)
            # one front door: broker 2 leads nothing here and forwards every request to broker 1
            _round(leader, "1", plan.seconds, [leader.pid], direct)
            _round(cluster.broker(2), "1", plan.seconds, _cluster_pids(cluster), forwarded)
    finally:
        slow_launcher.close()
        launcher.close()
        shutil.rmtree(base, ignore_errors=True)
    return _metrics(
        plan,
        single_side,
        replicated,
        delayed,
        direct,
        forwarded,
        single_lat,
        replicated_lat,
        added_ms,
        proxy_cpu / slow_seconds,
    )


def _rounds_text(side: Side, peer: Side) -> str:
    joined = ", ".join(
        f"{s / 1000:.0f}k vs {p / 1000:.0f}k" for s, p in zip(side.rates, peer.rates, strict=True)
    )
    return f"records/s, Sluice vs peer: {joined}"


def _metrics(
    plan: Plan,
    single: Side,
    replicated: Side,
    delayed: Side,
    direct: Side,
    forwarded: Side,
    single_lat: list[float],
    replicated_lat: list[float],
    added_ms: float,
    proxy_busy: float,
) -> list[Metric]:
    client = (
        f"client: {PREBUILT_CONNECTIONS} keep-alive connections on raw sockets (uvloop, one "
        f"process, bench/pipelined.py), {PREBUILT_DEPTH} requests per write, one pre-built "
        f"16 KiB RecordBatch v2 of 100-byte values per request; median of {plan.rounds} "
        f"rounds of {plan.seconds:g} s alternating with the peer"
    )

    def busy(side: Side, peer: Side) -> str:
        return (
            f"the client's CPU {side.client_busy():.0%} of a core (the peer's rounds "
            f"{peer.client_busy():.0%})"
        )

    single_us = single.cpu_per_record_us()
    ratio = cpu_ratio(replicated.cpu_per_record_us(), single_us)
    delayed_ratio = cpu_ratio(delayed.cpu_per_record_us(), single_us)
    return [
        Metric(
            name="produce.replicated.records_per_s",
            value=round(replicated.median_rate()),
            unit="records/s",
            better="higher",
            workload=(
                f"acks=all, RF 3, min ISR 2, three brokers on loopback sharing the machine's "
                f"cores with the client (CPU alone bounds the ratio near 0.33 here); {client}; "
                f"{busy(replicated, single)}"
            ),
            rounds=_rounds_text(replicated, single),
            peer="the same client and bodies to one broker, RF 1, acks=1, each round just "
            "before Sluice's",
            peer_value=round(single.median_rate()),
            target_ratio=0.5,
        ),
        Metric(
            name="produce.replicated.cpu_ratio",
            value=round(ratio, 3),
            unit="x",
            better="lower",
            workload=(
                f"the three brokers' CPU (utime+stime from /proc/<pid>/stat) per "
                f"acknowledged record at RF 3 acks=all, {replicated.cpu_per_record_us():.2f} "
                f"us, over the single broker's at RF 1 acks=1, {single_us:.2f} us "
                f"(produce.replicated.records_per_s's rounds, medians); 3.0 means a follower "
                f"costs exactly one append; with {LINK_DELAY_S * 1000:g} ms added between "
                f"the brokers {delayed_ratio:.2f}"
            ),
            target_value=3.3,
        ),
        Metric(
            name="produce.replicated_delayed.records_per_s",
            value=round(delayed.median_rate()),
            unit="records/s",
            better="higher",
            workload=(
                f"as produce.replicated.records_per_s, on a second cluster whose "
                f"broker-to-broker links go through the fault suite's LinkProxy "
                f"(bench/delay_proxy.py, a process of its own) delaying every chunk "
                f"{LINK_DELAY_S * 1000:g} ms each way; a round trip through it takes "
                f"{added_ms:.2f} ms more than direct (measured: GET /healthz through the "
                f"proxy minus direct), its CPU {proxy_busy:.0%} of a core; {client}; "
                f"{busy(delayed, single)}; broker CPU ratio {delayed_ratio:.2f}"
            ),
            rounds=_rounds_text(delayed, single),
            peer="the same client and bodies to one broker, RF 1, acks=1 (the rounds of "
            "produce.replicated.records_per_s)",
            peer_value=round(single.median_rate()),
        ),
        Metric(
            name="produce.replicated.p99_ms",
            value=round(p99(replicated_lat), 2),
            unit="ms",
            better="lower",
            workload=(
                f"one connection, one request at a time (the pipelined client at depth 1), "
                f"one 16 KiB batch per request, acks=all, RF 3, min ISR 2; {len(replicated_lat)}"
                f" requests over {plan.rounds} rounds alternating with the peer's"
            ),
            peer="the same at acks=1 on one broker",
            peer_value=round(p99(single_lat), 2),
        ),
        Metric(
            name="produce.forwarded.records_per_s",
            value=round(forwarded.median_rate()),
            unit="records/s",
            better="higher",
            workload=(
                f"acks=1, RF 3, every request sent to a broker that leads no partition of "
                f"the topic and forwards it to the leader; {client}; {busy(forwarded, direct)}"
            ),
            rounds=_rounds_text(forwarded, direct),
            peer="the same client and bodies sent to the leader directly, same cluster, each "
            "round just before Sluice's",
            peer_value=round(direct.median_rate()),
            target_ratio=0.6,
        ),
    ]
