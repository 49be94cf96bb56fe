"""Quota isolation, measured: one tenant producing at twice its byte-rate quota, another
tenant's produce latency beside its own unloaded latency in the same run.

A real control plane (``manage.py runserver``, temp SQLite) and one real broker; tenant
``alpha`` gets ``produce_bytes_per_sec`` = 100,000 through the platform API; tenant
``bravo`` has no quota. Two client processes (separate interpreters, so neither waits on
the other's GIL), each with one keep-alive connection and one request in flight:

- the **loader** (alpha) offers 2x the quota: 4 KB JSON records paced at 200,000 B/s;
- the **prober** (bravo) sends a 100-byte JSON record every 4 ms and times each request.

Phase 1, **held rate**: the loader runs for whole quota windows (11 s quick, 22 s full);
its acknowledged request bytes over that time against the quota give
``quotas.held_rate.bytes_per_s`` and ``quotas.held_rate.deviation`` (target <= 0.10).

Phase 2, **interleaved**: the time is cut into 1 s slots, in cycles of four loaded slots and
one unloaded slot in a random order; the loader runs only in loaded slots. Alpha's 11 s quota
window spans its silent slots too, so in loaded slots it gets up to quota / 0.8 = 1.25x its
quota (throttled most of the time, as in phase 1; with fewer loaded slots it would run
unthrottled more often and the comparison would overstate the held state's load). Samples
in the first and last 150 ms of a slot are dropped. Machine noise (other processes on a shared
2-core machine) lands on both states alike, so the pooled loaded p99 against the pooled
unloaded p99 (``quotas.peer_p99_ms``, target ratio <= 1.2) measures what the throttled
tenant costs the other one. A 95% interval for that ratio comes from a bootstrap over whole
slots (slots, not samples, are resampled: noise comes in bursts). The broker's own CPU is
read from /proc at every slot edge, so the report says what the loaded tenant costs it.

``quotas.errors`` counts every non-200 answer and every failed request of both tenants
(target 0).
"""

from __future__ import annotations

import bisect
import heapq
import math
import multiprocessing
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.broker import cpu_seconds
from bench.report import Metric

QUOTA = 100_000  # bytes/s
VALUE_BYTES = 4_000
PROBE_INTERVAL_S = 0.004
SLOT_S = 1.0
GUARD_S = 0.15
CYCLE = ("loaded", "loaded", "loaded", "loaded", "unloaded")
BOOTSTRAP_REPS = 1000


# --- pure core: schedule and statistics -------------------------------------------------


def interleaved_slots(cycles: int, seed: int = 4) -> list[str]:
    """``cycles`` shuffled copies of ``CYCLE``: the state of each slot, in order."""
    rng = random.Random(seed)
    slots: list[str] = []
    for _ in range(cycles):
        cycle = list(CYCLE)
        rng.shuffle(cycle)
        slots.extend(cycle)
    return slots


def windows(
    start: float, slots: Sequence[str], slot_s: float = SLOT_S
) -> list[tuple[float, float]]:
    """The loaded time windows (merged where loaded slots follow each other)."""
    out: list[tuple[float, float]] = []
    for i, state in enumerate(slots):
        if state != "loaded":
            continue
        a, b = start + i * slot_s, start + (i + 1) * slot_s
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def by_slot(
    samples: Sequence[tuple[float, float]],
    start: float,
    n_slots: int,
    slot_s: float = SLOT_S,
    guard_s: float = GUARD_S,
) -> list[list[float]]:
    """Latencies grouped by the slot their request started in, without the samples that
    started within ``guard_s`` of a slot edge. ``samples`` are (start time, latency)."""
    slots: list[list[float]] = [[] for _ in range(n_slots)]
    for t, latency in samples:
        i, offset = divmod(t - start, slot_s)
        if 0 <= i < n_slots and guard_s <= offset <= slot_s - guard_s:
            slots[int(i)].append(latency)
    return slots


def away_from(
    samples: Sequence[tuple[float, float]],
    events: Sequence[float],
    before: float = 0.003,
    after: float = 0.001,
) -> list[float]:
    """Latencies of the samples (start, latency) with no event (another client's request
    sent or answered) from ``before`` ahead of their start to ``after`` past their end:
    what a request sees when the broker is not also serving the other tenant."""
    ev = sorted(events)
    out = []
    for t, latency in samples:
        k = bisect.bisect_left(ev, t - before)
        if k == len(ev) or ev[k] > t + latency + after:
            out.append(latency)
    return out


def quantile(xs: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (the value at rank ceil(q * n))."""
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q * n))
    # the (n - rank + 1)-th largest: cheaper than sorting everything for a high quantile
    return heapq.nlargest(n - rank + 1, xs)[-1]


def bootstrap_ratio(
    numerator: Sequence[Sequence[float]],
    denominator: Sequence[Sequence[float]],
    q: float = 0.99,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 7,
) -> tuple[float, float]:
    """A 95% percentile interval of quantile(q, pooled numerator) / quantile(q, pooled
    denominator), resampling whole groups (slots) with replacement on each side."""
    rng = random.Random(seed)
    num = [g for g in numerator if g]
    den = [g for g in denominator if g]
    ratios = []
    for _ in range(reps):
        a = [x for g in rng.choices(num, k=len(num)) for x in g]
        b = [x for g in rng.choices(den, k=len(den)) for x in g]
        ratios.append(quantile(a, q) / quantile(b, q))
    ratios.sort()
    return ratios[int(0.025 * reps)], ratios[min(reps - 1, int(0.975 * reps))]


# --- client processes -------------------------------------------------------------------


def _connect(broker_url: str, topic: str, key: str):
    from harness.control_plane import RestProducer

    return RestProducer(broker_url, topic, key)


def _prober(conn, broker_url: str, topic: str, key: str) -> None:
    """bravo: a small produce every PROBE_INTERVAL_S from ``begin`` to ``end``; sends back
    [(start, latency, status, throttle_ms)] and the errors."""
    producer = _connect(broker_url, topic, key)
    for _ in range(50):  # warm up the connection and the broker's paths
        producer.send("w")
    conn.send("ready")
    begin, end = conn.recv()
    time.sleep(max(0.0, begin - time.monotonic()))
    samples, errors = [], []
    while (now := time.monotonic()) < end:
        try:
            status, body, _, latency = producer.send("p" * 100)
        except OSError as e:
            errors.append(f"bravo: {e!r}")
            producer = _connect(broker_url, topic, key)
            continue
        if status != 200:
            errors.append(f"bravo: {status} {body}")
        samples.append((now, latency, status, body.get("throttle_time_ms", 0)))
        time.sleep(PROBE_INTERVAL_S)
    producer.close()
    conn.send((samples, errors))


def _loader(conn, broker_url: str, topic: str, key: str) -> None:
    """alpha: offers 2x the quota inside each of the windows it is sent; sends back
    [(start, end, status, request bytes, throttle_ms)] and the errors."""
    producer = _connect(broker_url, topic, key)
    conn.send("ready")
    spans = conn.recv()
    interval = (VALUE_BYTES + 60) / (2 * QUOTA)  # one request's share of 2x the quota
    value = "x" * VALUE_BYTES
    requests, errors = [], []
    for a, b in spans:
        time.sleep(max(0.0, a - time.monotonic()))
        next_send = a
        while (start := time.monotonic()) < b:
            try:
                status, body, nbytes, _ = producer.send(value)
            except OSError as e:
                errors.append(f"alpha: {e!r}")
                producer = _connect(broker_url, topic, key)
                continue
            if status != 200:
                errors.append(f"alpha: {status} {body}")
            requests.append((start, time.monotonic(), status, nbytes, body.get("throttle_time_ms")))
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))
    producer.close()
    conn.send((requests, errors))


@dataclass
class Worker:
    process: multiprocessing.Process
    conn: object
    result: object = field(default=None)


def _spawn(target, *args) -> Worker:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=target, args=(child, *args), daemon=True)
    p.start()
    return Worker(p, parent)


def _recv(w: Worker, timeout: float):
    if not w.conn.poll(timeout):
        raise RuntimeError(f"bench client {w.process.name} gave no answer in {timeout:.0f} s")
    return w.conn.recv()


# --- the run ---------------------------------------------------------------------------


def run(quick: bool = False) -> list[Metric]:
    from harness.control_plane import StaffSession, create_topic, start_control_plane

    hold_s = 11.0 if quick else 22.0
    cycles = 5 if quick else 24
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-quotas-"))
    try:
        with start_control_plane(base) as cp:
            alpha, bravo = cp.tenant("alpha"), cp.tenant("bravo")
            broker = cp.start_broker(1)
            create_topic(cp, broker, "load", alpha["api_key"])
            create_topic(cp, broker, "probe", bravo["api_key"])
            StaffSession(cp).set_quota("alpha", produce_bytes_per_sec=QUOTA)
            time.sleep(1.0)  # the broker's long poll delivers the quota within milliseconds
            prober = _spawn(_prober, broker.url, "probe", bravo["api_key"])
            loader = _spawn(_loader, broker.url, "load", alpha["api_key"])
            try:
                for w in (prober, loader):
                    assert _recv(w, 60) == "ready"
                slots = interleaved_slots(cycles)
                t0 = time.monotonic() + 0.5
                t1 = t0 + hold_s  # the interleaved phase starts when the hold ends
                end = t1 + len(slots) * SLOT_S
                prober.conn.send((t0, end))
                loader.conn.send([(t0, t1), *windows(t1, slots)])
                cpu = _broker_cpu_by_slot(broker.proc.pid, t1, len(slots))
                timeout = end - time.monotonic() + 60
                (samples, probe_errors), (requests, load_errors) = (
                    _recv(prober, timeout),
                    _recv(loader, timeout),
                )
            finally:
                for w in (prober, loader):
                    w.process.join(10)
                    if w.process.is_alive():
                        w.process.kill()
        return _metrics(
            samples, requests, probe_errors + load_errors, slots, cpu, t0, t1, hold_s, quick
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _broker_cpu_by_slot(pid: int, start: float, n_slots: int) -> list[float]:
    """The broker's CPU seconds in each slot (read at every slot edge)."""
    time.sleep(max(0.0, start - time.monotonic()))
    last, out = cpu_seconds(pid), []
    for i in range(1, n_slots + 1):
        time.sleep(max(0.0, start + i * SLOT_S - time.monotonic()))
        now = cpu_seconds(pid)
        out.append(now - last)
        last = now
    return out


def _metrics(samples, requests, errors, slots, cpu, t0, t1, hold_s, quick) -> list[Metric]:
    held = [r for r in requests if r[0] < t1]
    ok = [r for r in held if r[2] == 200]
    elapsed = max(r[1] for r in held) - t0
    rate = sum(r[3] for r in ok) / elapsed
    throttled = sum(1 for r in ok if r[4])
    bravo_throttled = sum(1 for s in samples if s[3])
    grouped = by_slot([(s[0], s[1]) for s in samples], t1, len(slots))
    loaded_slots = [g for g, s in zip(grouped, slots, strict=True) if s == "loaded"]
    unloaded_slots = [g for g, s in zip(grouped, slots, strict=True) if s == "unloaded"]
    loaded = [x * 1000 for g in loaded_slots for x in g]
    loaded_samples = [
        (t, latency)
        for t, latency, *_ in samples
        if 0 <= (t - t1) // SLOT_S < len(slots) and slots[int((t - t1) // SLOT_S)] == "loaded"
    ]
    alpha_events = [t for r in requests if r[0] >= t1 for t in r[:2]]
    quiet = away_from(loaded_samples, alpha_events)
    unloaded = [x * 1000 for g in unloaded_slots for x in g]
    lo, hi = bootstrap_ratio(loaded_slots, unloaded_slots)
    cpu_l = [c for c, s in zip(cpu, slots, strict=True) if s == "loaded"]
    cpu_u = [c for c, s in zip(cpu, slots, strict=True) if s == "unloaded"]
    cpu_text = (
        f"broker CPU {100 * sum(cpu_l) / len(cpu_l) / SLOT_S:.1f}% in loaded slots vs "
        f"{100 * sum(cpu_u) / len(cpu_u) / SLOT_S:.1f}% unloaded"
    )
    in_loaded = [r for r in requests if r[0] >= t1 and r[2] == 200]
    loaded_time = slots.count("loaded") * SLOT_S
    setup = (
        "one broker and a control plane on loopback; tenant alpha (quota "
        f"{QUOTA:,} B/s) offers 2x its quota in 4 KB JSON records, one request in flight"
    )
    interleave = (
        f"{len(slots) // len(CYCLE)} cycles of 4 loaded + 1 unloaded 1 s slots, shuffled, "
        f"{GUARD_S * 1000:.0f} ms dropped at slot edges"
    )
    metrics = [
        Metric(
            name="quotas.peer_p99_ms",
            value=round(quantile(loaded, 0.99), 3),
            unit="ms",
            better="lower",
            workload=(
                f"{setup}; tenant bravo's 100-byte JSON produce latency (one every "
                f"{PROBE_INTERVAL_S * 1000:.0f} ms, one connection) while alpha is loaded, "
                f"{interleave}; n={len(loaded)} loaded vs {len(unloaded)} unloaded; "
                f"p99 ratio 95% CI {lo:.2f}-{hi:.2f} (bootstrap over slots); p50 "
                f"{quantile(loaded, 0.5):.3f} vs {quantile(unloaded, 0.5):.3f} ms; "
                f"alpha achieved {sum(r[3] for r in in_loaded) / loaded_time:,.0f} B/s in "
                f"loaded slots; {cpu_text}; bravo's p99 in loaded slots away from alpha's "
                f"requests (none sent or answered from 3 ms before to 1 ms after; "
                f"{100 * len(quiet) / max(1, len(loaded_samples)):.0f}% of them) "
                f"{quantile(quiet, 0.99) * 1000:.3f} ms; bravo throttled {bravo_throttled} times"
            ),
            peer="bravo's own p99 in the interleaved unloaded slots of the same run",
            peer_value=round(quantile(unloaded, 0.99), 3),
            target_ratio=1.2,
        ),
        Metric(
            name="quotas.peer_p50_ms",
            value=round(quantile(loaded, 0.5), 3),
            unit="ms",
            better="lower",
            workload="as quotas.peer_p99_ms, the median",
            peer="bravo's own p50 in the unloaded slots of the same run",
            peer_value=round(quantile(unloaded, 0.5), 3),
        ),
        Metric(
            name="quotas.held_rate.bytes_per_s",
            value=round(rate),
            unit="B/s",
            better="lower",
            workload=(
                f"{setup}, continuously for {hold_s:.0f} s from an idle start; acknowledged "
                f"request bytes / time; {len(ok)} requests, {throttled} throttled, max "
                f"throttle {max((r[4] or 0 for r in ok), default=0)} ms"
            ),
            peer="the quota",
            peer_value=QUOTA,
        ),
        Metric(
            name="quotas.held_rate.deviation",
            value=round(abs(rate / QUOTA - 1), 4),
            unit="fraction",
            better="lower",
            workload="|held rate / quota - 1| of quotas.held_rate.bytes_per_s",
            target_value=0.10,
        ),
        Metric(
            name="quotas.errors",
            value=len(errors),
            unit="errors",
            better="lower",
            workload=(
                f"non-200 answers and failed requests of both tenants over the whole run "
                f"({len(requests)} alpha, {len(samples)} bravo requests)"
                + (f"; first: {errors[0]}" if errors else "")
            ),
            target_value=0,
        ),
    ]
    return metrics
