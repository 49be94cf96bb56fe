"""Analytics benchmark: the lag and throughput jobs on Spark ``local[2]`` beside a
single-process plain-Python implementation of the same computation over the same data
(../shared/BENCH.md, ``spark.lag_throughput.records_per_s``; target ratio >= 1.0).

The data: 10 million records (200,000 with --quick) of topic ``bench`` in 24 partitions
over two hours (partition 0 gets three shares, so it is a hot partition), 8-byte keys and
50-176-byte values, timestamps rising with the offset with +-50 ms of disorder; and
``__consumer_offsets`` rows of three groups committing every 10 s (60 s with --quick) to
every partition (``healthy`` at the log end, ``slow`` at half of it, ``stopped`` until
half-time). They are written once, untimed, as Parquet: one file per partition (a
partition's log) plus one file of commits, with the columns the ``sluice`` source gives the
jobs. Both sides read those files, so the figure is the jobs' computation, not the broker
fetch (benchmarked in ``broker``).

- Spark (timed from the first read to the last collected row; the session, 7-8 s to start,
  is created before and kept, as the Celery worker keeps it): one read of the records into
  per-second slices (``record_slices``: records, bytes, last timestamp, log end), cached;
  from them the lag job's results (``spark.jobs.lag.results``: the samples from one stream
  of slices and commits per partition, framed once, the history and the status at ``now``
  with the log starts in one query) and the throughput job's
  (``spark.jobs.throughput.results`` over ``throughput.from_slices``: minutes, hours rolled
  up, peaks, skew in one query), every result collected as rows.
- Python (timed the same way): reads each partition's file with pyarrow into lists, one pass
  per partition in plain Python (minute buckets with records, bytes, last timestamp and log
  end; the log end at each commit by bisecting the commit times; the timestamps at committed
  offsets), hours summed from minutes, then the samples, the same Burrow evaluation
  (``spark.transforms.burrow``) per sample and at ``now``, peaks and skew.

Two figures, both sides measured the same way over the same data:
``spark.lag_throughput.records_per_s`` (the headline; what a scheduled run on the Celery
worker's long-lived session meets) is the median of 3 timed runs after one untimed warm-up
run, on each side; ``spark.lag_throughput.cold_records_per_s`` is the first run on a fresh
Spark session (JVM planning, code generation and JIT included) against Python's first run.
Every Spark run's result is compared with Python's row by row before anything is reported: a
mismatch fails the run.
"""

from __future__ import annotations

import bisect
import math
import shutil
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.report import Metric
from spark.transforms.burrow import Sample, evaluate

TENANT, TOPIC = "t1", "bench"
PARTITIONS = 24
HOT = {0: 3}  # partition -> shares of the records (others 1)
MINUTE, HOUR = 60_000, 3_600_000
T0 = 1_700_000_000_000 // HOUR * HOUR
SPAN_MS = 2 * HOUR
NOW_MS = T0 + SPAN_MS + 30_000
COMMIT_EVERY_MS = 10_000
GROUPS = ("healthy", "slow", "stopped")
WINDOW = 10
MIN_STOP_MS = 60_000
HOT_FACTOR = 2.0
KEYS = [b"key-%04d" % i for i in range(1000)]
VALUES = [bytes([97 + i % 26]) * (50 + 2 * i) for i in range(64)]
TS_MS = pa.timestamp("ms", tz="UTC")


# ---------------------------------------------------------------- data


def partition_sizes(total: int) -> list[int]:
    shares = [HOT.get(p, 1) for p in range(PARTITIONS)]
    sizes = [total * s // sum(shares) for s in shares]
    sizes[-1] += total - sum(sizes)
    return sizes


def generate(base: Path, total: int, commit_every_ms: int = COMMIT_EVERY_MS) -> None:
    """Write ``records/p-NN.parquet`` (one per partition) and ``commits.parquet``."""
    (base / "records").mkdir(parents=True)
    keys, values = pa.array(KEYS, pa.binary()), pa.array(VALUES, pa.binary())
    commits: dict[str, list] = defaultdict(list)
    for p, n in enumerate(partition_sizes(total)):
        offsets = range(n)
        stamps = [T0 + o * SPAN_MS // n + (o * 7919 + p) % 101 - 50 for o in offsets]
        table = pa.table(
            {
                "tenant": pa.array([TENANT] * n, pa.string()),
                "topic": pa.array([TOPIC] * n, pa.string()),
                "partition": pa.array([p] * n, pa.int32()),
                "offset": pa.array(offsets, pa.int64()),
                "timestamp": pa.array(stamps, pa.int64()).cast(TS_MS),
                "key": pc.take(keys, pa.array([(o * 31 + p) % 1000 for o in offsets])),
                "value": pc.take(values, pa.array([(o * 17 + p) % 64 for o in offsets])),
            }
        )
        pq.write_table(table, base / "records" / f"p-{p:02d}.parquet")
        for ts in range(T0 + commit_every_ms, T0 + SPAN_MS + 1, commit_every_ms):
            end = min(n, (ts - T0) * n // SPAN_MS)
            for i, (group, offset) in enumerate(
                (("healthy", end), ("slow", end // 2), ("stopped", end))
            ):
                if group == "stopped" and ts > T0 + SPAN_MS // 2:
                    continue
                for col, v in zip(
                    ("group", "partition", "committed_offset", "commit_timestamp"),
                    (group, p, offset, ts + i + 1),
                    strict=True,
                ):
                    commits[col].append(v)
    k = len(commits["group"])
    pq.write_table(
        pa.table(
            {
                "tenant": pa.array([TENANT] * k, pa.string()),
                "group": pa.array(commits["group"], pa.string()),
                "topic": pa.array([TOPIC] * k, pa.string()),
                "partition": pa.array(commits["partition"], pa.int32()),
                "committed_offset": pa.array(commits["committed_offset"], pa.int64()),
                "commit_timestamp": pa.array(commits["commit_timestamp"], pa.int64()).cast(TS_MS),
            }
        ),
        base / "commits.parquet",
    )


# ---------------------------------------------------------------- plain Python


def _ms_list(table: pa.Table, column: str) -> list[int]:
    return table.column(column).cast(pa.int64()).to_pylist()


def python_jobs(base: Path) -> dict:
    """The lag and throughput results, computed in one process in plain Python."""
    c = pq.read_table(base / "commits.parquet")
    by_tp: dict = defaultdict(lambda: defaultdict(list))  # tp -> group -> [(ts, committed)]
    for ten, g, top, p, off, ts in zip(
        *(c.column(n).to_pylist() for n in ("tenant", "group", "topic", "partition")),
        c.column("committed_offset").to_pylist(),
        _ms_list(c, "commit_timestamp"),
        strict=True,
    ):
        if off is not None:
            by_tp[(ten, top, p)][g].append((ts, off))
    minute: dict = {}
    hour: dict = defaultdict(lambda: [0, 0])
    history, status = [], {}
    for path in sorted((base / "records").glob("*.parquet")):
        t = pq.read_table(path, columns=["tenant", "topic", "partition", "offset", "timestamp"])
        kv = pq.read_table(path, columns=["key", "value"])
        tp = tuple(t.column(n)[0].as_py() for n in ("tenant", "topic", "partition"))
        offsets = t.column("offset").to_pylist()
        groups = by_tp.get(tp, {})
        commit_ts = sorted({ts for cs in groups.values() for ts, _ in cs})
        wanted = {off for cs in groups.values() for _, off in cs}
        end_at = [0] * len(commit_ts)  # largest end of records stamped in (previous, this]
        ncommits = len(commit_ts)
        rec_ms: dict[int, int] = {}
        buckets: dict[int, list[int]] = {}  # minute -> [records, bytes, last ts, log end]
        for off, ts, k, v in zip(
            offsets,
            _ms_list(t, "timestamp"),
            kv.column("key").to_pylist(),
            kv.column("value").to_pylist(),
            strict=True,
        ):
            size = (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
            end = off + 1
            m = ts - ts % MINUTE
            acc = buckets.get(m)
            if acc is None:
                buckets[m] = [1, size, ts, end]
            else:
                acc[0] += 1
                acc[1] += size
                if ts > acc[2]:
                    acc[2] = ts
                if end > acc[3]:
                    acc[3] = end
            i = bisect.bisect_left(commit_ts, ts)
            if i < ncommits and end > end_at[i]:
                end_at[i] = end
            if off in wanted:
                rec_ms[off] = ts
        for m, (n, size, _, _) in buckets.items():
            minute[(*tp, m)] = (n, size)
            h = hour[(*tp, m - m % HOUR)]
            h[0] += n
            h[1] += size
        log_end_at, running = {}, 0
        for ts, e in zip(commit_ts, end_at, strict=True):
            running = max(running, e)
            log_end_at[ts] = running
        moves, running = [], 0
        for _, _, last, e in sorted(buckets.values(), key=lambda a: a[2]):
            running = max(running, e)
            moves.append((last, False, None, running))
        log_start = min(offsets) if offsets else None
        for group, cs in groups.items():
            events = sorted(
                moves + [(ts, True, off, log_end_at[ts]) for ts, off in cs],
                key=lambda e: (e[0], e[1]),
            )
            samples = _samples(tp, group, events, rec_ms)
            history.extend(_evaluated(samples))
            status[(tp[0], group, tp[1], tp[2])] = _status(samples, log_start)
    peaks, skew = _peaks(minute), _skew(hour)
    return {
        "history": history,
        "status": status,
        "minute": minute,
        "hour": {k: tuple(v) for k, v in hour.items()},
        "peaks": peaks,
        "skew": skew,
    }


def _samples(tp: tuple, group: str, events: list, rec_ms: dict) -> list[tuple]:
    """(key, ts, committed, log_end, lag, time_lag, is_commit, last_commit) from the group's
    first commit on, as ``lag_samples`` defines them."""
    out, committed, log_end, last_commit = [], None, 0, None
    key = (tp[0], group, tp[1], tp[2])
    for ts, is_commit, off, end in events:
        if is_commit:
            committed = off
            last_commit = ts if last_commit is None else max(last_commit, ts)
        log_end = max(log_end, end)
        if committed is None:
            continue
        lag = max(log_end - committed, 0)
        at = rec_ms.get(committed)
        time_lag = 0 if lag == 0 or at is None else max(ts - at, 0)
        out.append((key, ts, committed, log_end, lag, time_lag, is_commit, last_commit))
    return out


def _evaluated(samples: list[tuple]) -> list[tuple]:
    """Each sample with its evaluation over itself and the samples before it, at its time."""
    window = [Sample(s[1], s[2], s[3], s[6]) for s in samples]
    out = []
    for i, s in enumerate(samples):
        e = evaluate(
            window[max(0, i - WINDOW + 1) : i + 1],
            now_ms=s[1],
            last_commit_ms=s[7],
            min_stop_ms=MIN_STOP_MS,
        )
        out.append((*s, e.status, e.consume_rate, e.produce_rate, e.catch_up_s))
    return out


def _status(samples: list[tuple], log_start: int | None) -> tuple:
    recent = [s for s in samples if s[1] <= NOW_MS][-WINDOW:]
    last = recent[-1]
    e = evaluate(
        [Sample(s[1], s[2], s[3], s[6]) for s in recent],
        now_ms=NOW_MS,
        last_commit_ms=last[7],
        min_stop_ms=MIN_STOP_MS,
        log_start_offset=log_start,
    )
    return (last[2], last[3], last[4], last[5], last[1], last[7], log_start, e.status,
            e.consume_rate, e.produce_rate, e.catch_up_s)  # fmt: skip


def _peaks(minute: dict) -> dict:
    per_topic: dict = defaultdict(lambda: [0, 0])
    for (ten, top, _, m), (n, size) in minute.items():
        acc = per_topic[(ten, top, m)]
        acc[0] += n
        acc[1] += size
    out: dict = {}
    for (ten, top, m), (n, size) in per_topic.items():
        acc = out.setdefault((ten, top), [m, n, size, 0, 0])
        if n > acc[1] or (n == acc[1] and m < acc[0]):
            acc[0], acc[1] = m, n
        acc[2] = max(acc[2], size)
        acc[3] += n
        acc[4] += 1
    return {k: (m, n, size, total / periods) for k, (m, n, size, total, periods) in out.items()}


def _skew(hour: dict) -> dict:
    busiest: dict = {}
    totals: Counter = Counter()
    for (ten, top, p, h), (n, _) in hour.items():
        key = (ten, top, h)
        totals[key] += n
        best = busiest.get(key)
        if best is None or n > best[1] or (n == best[1] and p < best[0]):
            busiest[key] = (p, n)
    out = {}
    for key, (p, n) in busiest.items():
        share = n / totals[key]
        hot = p if share * PARTITIONS >= HOT_FACTOR else None
        out[key] = (p, share, share * PARTITIONS, hot)
    return out


# ---------------------------------------------------------------- Spark


def _ms(dt) -> int:
    return round(dt.timestamp() * 1000)


def spark_jobs(spark, base: Path) -> dict:
    """The same results through ``spark.transforms``, composed as ``spark/jobs`` do."""

    from spark.jobs import lag as lag_job
    from spark.jobs import throughput as throughput_job
    from spark.transforms import lag, throughput

    records = spark.read.parquet(str(base / "records"))
    commits = spark.read.parquet(str(base / "commits.parquet")).cache()  # as the lag job
    # one read of the records for both jobs: per-second slices (records, bytes, last
    # timestamp, log end), cached; the lag and the throughput minutes derive from them
    slices = lag.record_slices(records, commits).cache()
    lag_rows = lag_job.results(
        slices, commits, now_ms=NOW_MS, window=WINDOW, min_stop_ms=MIN_STOP_MS
    )
    history, status = lag_rows["history"], lag_rows["status"]
    minute_df = throughput.from_slices(slices, "minute").cache()
    counts = spark.createDataFrame(
        [(TENANT, TOPIC, PARTITIONS)], "tenant string, topic string, partitions int"
    )
    tp_rows = throughput_job.results(minute_df, counts, hot_factor=HOT_FACTOR)
    minute, hour, peaks, skew = (tp_rows[k] for k in ("minute", "hour", "peaks", "skew"))
    minute_df.unpersist()
    slices.unpersist()
    commits.unpersist()
    tp = ("tenant", "topic", "partition")
    return {
        "history": [
            (
                (r["tenant"], r["group"], r["topic"], r["partition"]),
                r["ts_ms"],
                r["committed_offset"],
                r["log_end_offset"],
                r["offset_lag"],
                r["time_lag_ms"],
                r["is_commit"],
                r["last_commit_ms"],
                r["status"],
                r["consume_rate"],
                r["produce_rate"],
                r["catch_up_s"],
            )
            for r in history
        ],
        "status": {
            (r["tenant"], r["group"], r["topic"], r["partition"]): (
                r["committed_offset"],
                r["log_end_offset"],
                r["offset_lag"],
                r["time_lag_ms"],
                r["sampled_ms"],
                r["last_commit_ms"],
                r["log_start_offset"],
                r["status"],
                r["consume_rate"],
                r["produce_rate"],
                r["catch_up_s"],
            )
            for r in status
        },
        "minute": {(*(r[c] for c in tp), _ms(r["ts"])): (r["records"], r["bytes"]) for r in minute},
        "hour": {(*(r[c] for c in tp), _ms(r["ts"])): (r["records"], r["bytes"]) for r in hour},
        "peaks": {
            (r["tenant"], r["topic"]): (
                _ms(r["peak_ts"]),
                r["peak_records"],
                r["peak_bytes"],
                r["mean_records"],
            )
            for r in peaks
        },
        "skew": {
            (r["tenant"], r["topic"], _ms(r["ts"])): (
                r["busiest_partition"],
                r["max_share"],
                r["skew"],
                r["hot_partition"],
            )
            for r in skew
        },
    }


# ---------------------------------------------------------------- compare and run


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def differences(py: dict, sp: dict) -> list[str]:
    """What differs between the two results (empty when they agree row by row)."""
    out = []
    for name in ("status", "minute", "hour", "peaks", "skew"):
        a, b = py[name], sp[name]
        if a.keys() != b.keys():
            out.append(f"{name}: keys differ ({len(a)} python, {len(b)} spark)")
            continue
        bad = [k for k in a if not _same(a[k], b[k])]
        if bad:
            out.append(f"{name}: {len(bad)} rows differ, e.g. {bad[0]}: {a[bad[0]]} vs {b[bad[0]]}")
    a = sorted(py["history"], key=lambda s: (s[0], s[1], s[6]))
    b = sorted(sp["history"], key=lambda s: (s[0], s[1], s[6]))
    if len(a) != len(b):
        out.append(f"history: {len(a)} python rows, {len(b)} spark rows")
    else:
        bad = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _same(x, y)]
        if bad:
            out.append(f"history: {len(bad)} rows differ, e.g. {a[bad[0]]} vs {b[bad[0]]}")
    return out


TIMED_RUNS = 3  # after one untimed warm-up run, on each side; the headline is their median


def _timed(job, *args) -> tuple[float, dict]:
    started = time.perf_counter()
    out = job(*args)
    return time.perf_counter() - started, out


def _check(py: dict, sp: dict, which: str) -> None:
    diff = differences(py, sp)
    if diff:
        raise RuntimeError(f"Spark ({which}) and plain-Python results differ: " + "; ".join(diff))


def run(quick: bool = False) -> list[Metric]:
    total = 200_000 if quick else 10_000_000
    commit_every_ms = 60_000 if quick else COMMIT_EVERY_MS
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-spark-"))
    spark = None
    try:
        started = time.perf_counter()
        generate(base, total, commit_every_ms)
        print(f"spark: generated {total:,} records in {time.perf_counter() - started:.1f} s")
        # Python: the first run is the cold figure and the warm-up; then the timed runs
        py_cold, py = _timed(python_jobs, base)
        py_runs = [_timed(python_jobs, base)[0] for _ in range(TIMED_RUNS)]
        py_s = statistics.median(py_runs)
        print(f"spark: plain Python first {py_cold:.1f} s, then {_fmt(py_runs)}", flush=True)

        from spark.session import get_session

        spark = get_session("local[2]", "sluice-bench", **{"spark.driver.memory": "4g"})
        # Spark: the first run on the fresh session is the cold figure and the warm-up
        spark_cold, sp = _timed(spark_jobs, spark, base)
        _check(py, sp, "first run")
        spark_runs = []
        for i in range(TIMED_RUNS):
            took, sp = _timed(spark_jobs, spark, base)
            _check(py, sp, f"run {i + 2}")
            spark_runs.append(took)
        spark_s = statistics.median(spark_runs)
        print(f"spark: Spark local[2] first {spark_cold:.1f} s, then {_fmt(spark_runs)}")
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    statuses = dict(sorted(Counter(s[7] for s in py["status"].values()).items()))
    what = (
        f"lag + throughput jobs' transforms over {total:,} records in {PARTITIONS} partitions "
        f"(2 h, one hot partition) and {len(py['history']):,} lag samples of 3 groups "
        f"committing every {commit_every_ms // 1000} s, read from Parquet, every result "
        f"collected; results equal row by row on every run; statuses {statuses}"
    )
    peer = "one process, plain Python over the same Parquet files (pyarrow to lists), same "
    return [
        Metric(
            name="spark.lag_throughput.records_per_s",
            value=round(total / spark_s),
            unit="records/s",
            better="higher",
            workload=f"{what}; warm: each side the median of {TIMED_RUNS} timed runs after "
            f"one untimed warm-up run (Spark in one session, as the Celery worker keeps it): "
            f"Spark local[2] {_fmt(spark_runs)}",
            peer=f"{peer}Burrow evaluation, median of {TIMED_RUNS} runs after a warm-up: "
            f"{_fmt(py_runs)}",
            peer_value=round(total / py_s),
            target_ratio=1.0,
        ),
        Metric(
            name="spark.lag_throughput.cold_records_per_s",
            value=round(total / spark_cold),
            unit="records/s",
            better="higher",
            workload=f"{what}; cold: the first run on a fresh Spark session (session start "
            f"excluded, JVM planning, code generation and JIT included): {spark_cold:.1f} s",
            peer=f"{peer}Burrow evaluation, its first run: {py_cold:.1f} s",
            peer_value=round(total / py_cold),
            target_ratio=1.0,
        ),
    ]


def _fmt(runs: list[float]) -> str:
    return " / ".join(f"{r:.1f}" for r in runs) + " s"
