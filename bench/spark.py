"""Analytics benchmark: the lag and throughput jobs on Spark ``local[2]`` beside a
single-machine baseline of the same computation over the same data, at several sizes
(docs/analytics.md: the crossover; ``spark.lag_throughput.records_per_s``, target ratio >= 1.0
at the largest size).

The data, at 0.2M, 2M and 20M records (0.2M only with --quick): topic ``bench`` in 24
partitions over two hours (partition 0 gets three shares, so it is a hot partition), 8-byte
keys and 50-176-byte values, timestamps rising with the offset with +-50 ms of disorder; and
``__consumer_offsets`` rows of three groups committing every 10 s (60 s with --quick) to every
partition (``healthy`` at the log end, ``slow`` at half of it, ``stopped`` until half-time).
They are written once per size, untimed, as Parquet: one file per partition (a partition's
log) plus one file of commits, with the columns the ``sluice`` source gives the jobs. Both
sides read those files, so the figure is the jobs' computation, not the broker fetch
(benchmarked in ``broker``).

- Spark (timed from the first read to the last collected row; the session, 7-8 s to start,
  is created once before the first size and kept, as the Celery worker keeps it): one read of
  the records into per-second slices (``record_slices``), cached; from them the lag job's
  results (``spark.jobs.lag.results``) and the throughput job's
  (``spark.jobs.throughput.results`` over ``throughput.from_slices``), every result collected
  as rows.
- Baseline (timed the same way): ``bench.spark_baseline``, pyarrow.compute over the same
  files in one process with two threads (the cores ``local[2]`` has), the per-record work
  vectorised, the Burrow rules of ``spark.transforms.burrow`` over every sample's window in
  one pass per history (``bench.burrow_window``).

Per size, each side runs once untimed (the warm-up) and then ``TIMED_RUNS`` times, the sides
alternating; ``spark.lag_throughput.records_per_s@<size>`` is Spark's median against the
baseline's, ``spark.lag_throughput.records_per_s`` repeats the largest size measured (the
target), and ``spark.lag_throughput.cold_records_per_s`` is the first run on the fresh session
(the smallest size: JVM planning, code generation and JIT included) against the baseline's
first run. Every Spark run's result is compared with the baseline's row by row before anything
is reported: a mismatch fails the run.

The same session then measures the sink (``bench/spark_sink.py``, ``spark.sink.records_per_s``)
and a streaming query from the source to the sink (``bench/spark_stream.py``,
``spark.stream.records_per_s`` and ``spark.stream.latency_s``), each against one broker.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import spark_sink, spark_stream
from bench.report import Metric, run_times
from bench.spark_baseline import Settings, baseline_jobs

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


def differences(expected: dict, sp: dict) -> list[str]:
    """What differs between the baseline's results and Spark's (empty when they agree row
    by row)."""
    out = []
    for name in ("status", "minute", "hour", "peaks", "skew"):
        a, b = expected[name], sp[name]
        if a.keys() != b.keys():
            out.append(f"{name}: keys differ ({len(a)} baseline, {len(b)} spark)")
            continue
        bad = [k for k in a if not _same(a[k], b[k])]
        if bad:
            out.append(f"{name}: {len(bad)} rows differ, e.g. {bad[0]}: {a[bad[0]]} vs {b[bad[0]]}")
    a = sorted(expected["history"], key=lambda s: (s[0], s[1], s[6]))
    b = sorted(sp["history"], key=lambda s: (s[0], s[1], s[6]))
    if len(a) != len(b):
        out.append(f"history: {len(a)} baseline rows, {len(b)} spark rows")
    else:
        bad = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _same(x, y)]
        if bad:
            out.append(f"history: {len(bad)} rows differ, e.g. {a[bad[0]]} vs {b[bad[0]]}")
    return out


TIMED_RUNS = 3  # after one untimed warm-up run, on each side; the figure is their median
SIZES = (200_000, 2_000_000, 20_000_000)  # the crossover; --quick runs the first only


def _timed(job, *args) -> tuple[float, dict]:
    started = time.perf_counter()
    out = job(*args)
    return time.perf_counter() - started, out


def _jvm_cpu_s(spark) -> float | None:
    """CPU seconds the session's JVM has used (utime + stime from /proc), or None when the
    JVM is not this process's child or /proc is not there."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_timed(spark, job, *args) -> tuple[float, float | None, dict]:
    """Wall seconds, CPU seconds (this process's, plus the JVM's when ``spark`` is given;
    None when the JVM's cannot be read) and the job's result."""
    jvm = _jvm_cpu_s(spark) if spark is not None else 0.0
    cpu = time.process_time()
    took, out = _timed(job, *args)
    cpu = time.process_time() - cpu
    if spark is not None:
        after = _jvm_cpu_s(spark)
        if jvm is None or after is None:
            return took, None, out
        cpu += after - jvm
    return took, cpu, out


def _check(base_out: dict, sp: dict, which: str) -> None:
    diff = differences(base_out, sp)
    if diff:
        raise RuntimeError(f"Spark ({which}) and the baseline's results differ: " + "; ".join(diff))


def settings() -> Settings:
    """What the benchmark asks of both sides."""
    return Settings(
        now_ms=NOW_MS,
        window=WINDOW,
        min_stop_ms=MIN_STOP_MS,
        hot_factor=HOT_FACTOR,
        partitions={(TENANT, TOPIC): PARTITIONS},
    )


@dataclass
class Measured:
    """One size: each side's first run and timed runs (s), and what the results held."""

    total: int
    baseline_first: float
    baseline_runs: list[float]
    spark_first: float
    spark_runs: list[float]
    samples: int
    statuses: dict
    baseline_cpu: float  # CPU s per timed run, median: the process
    spark_cpu: float | None  # the same for Spark: JVM and driver


def measure(spark, total: int, commit_every_ms: int) -> Measured:
    """Generate ``total`` records, then warm-up and timed runs, the two sides alternating
    round by round so that a burst of outside load lands on both; every Spark result is
    compared with the baseline's."""
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-spark-"))
    try:
        started = time.perf_counter()
        generate(base, total, commit_every_ms)
        print(f"spark: generated {total:,} records in {time.perf_counter() - started:.1f} s")
        job = settings()
        baseline_first, expected = _timed(baseline_jobs, base, job)
        spark_first, sp = _timed(spark_jobs, spark, base)
        _check(expected, sp, "first run")
        baseline_runs, spark_runs, baseline_cpu, spark_cpu = [], [], [], []
        for i in range(TIMED_RUNS):
            took, cpu, _ = _cpu_timed(None, baseline_jobs, base, job)
            baseline_runs.append(took)
            baseline_cpu.append(cpu)
            took, cpu, sp = _cpu_timed(spark, spark_jobs, spark, base)
            _check(expected, sp, f"run {i + 2}")
            spark_runs.append(took)
            spark_cpu.append(cpu)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"spark: {total:,} records: baseline first {baseline_first:.2f} s, then "
        f"{run_times(baseline_runs)}; Spark local[2] first {spark_first:.1f} s, then "
        f"{run_times(spark_runs)}",
        flush=True,
    )
    return Measured(
        total,
        baseline_first,
        baseline_runs,
        spark_first,
        spark_runs,
        len(expected["history"]),
        dict(sorted(Counter(s[7] for s in expected["status"].values()).items())),
        statistics.median(baseline_cpu),
        None if None in spark_cpu else statistics.median(spark_cpu),
    )


def size_label(total: int) -> str:
    """``0.2M``, ``2M``, ``20M``: the suffix of the per-size metric names."""
    return f"{total / 1_000_000:g}M"


def run(quick: bool = False) -> list[Metric]:
    sizes = SIZES[:1] if quick else SIZES
    commit_every_ms = 60_000 if quick else COMMIT_EVERY_MS
    from spark.session import get_session

    spark = get_session("local[2]", "sluice-bench", **{"spark.driver.memory": "4g"})
    try:
        measured = [measure(spark, total, commit_every_ms) for total in sizes]
        sink = spark_sink.measure(spark, quick)  # the sink's throughput (bench/spark_sink.py)
        stream = spark_stream.measure(spark, quick)  # source to sink (bench/spark_stream.py)
    finally:
        spark.stop()
    metrics = [
        _warm(m, f"spark.lag_throughput.records_per_s@{size_label(m.total)}", commit_every_ms)
        for m in measured
    ]
    headline = _warm(measured[-1], "spark.lag_throughput.records_per_s", commit_every_ms)
    headline.target_ratio = 1.0
    first = measured[0]
    cold = Metric(
        name="spark.lag_throughput.cold_records_per_s",
        value=round(first.total / first.spark_first),
        unit="records/s",
        better="higher",
        workload=f"{_what(first, commit_every_ms)}; cold: the first run on a fresh Spark "
        f"session (session start excluded, JVM planning, code generation and JIT included): "
        f"{first.spark_first:.1f} s",
        peer=f"{PEER}, its first run in the process: {first.baseline_first:.2f} s",
        peer_value=round(first.total / first.baseline_first),
    )
    return [headline, cold, *metrics, sink, *stream]


PEER = (
    "one process, pyarrow.compute over the same Parquet files (bench/spark_baseline.py: "
    "each partition file read in batches, per batch one search_sorted and one hash group_by "
    "over the records and is_in for the committed offsets, two threads; the same Burrow "
    "rules over every sample's window in one pass, bench/burrow_window.py)"
)


def _what(m: Measured, commit_every_ms: int) -> str:
    return (
        f"lag + throughput jobs' transforms over {m.total:,} records in {PARTITIONS} "
        f"partitions (2 h, one hot partition) and {m.samples:,} lag samples of 3 groups "
        f"committing every {commit_every_ms // 1000} s, read from Parquet, every result "
        f"collected; results equal row by row on every run; statuses {m.statuses}"
    )


def _warm(m: Measured, name: str, commit_every_ms: int) -> Metric:
    return Metric(
        name=name,
        value=round(m.total / statistics.median(m.spark_runs)),
        unit="records/s",
        better="higher",
        workload=f"{_what(m, commit_every_ms)}; warm: each side the median of {TIMED_RUNS} "
        f"timed runs after one untimed warm-up run, the sides alternating (Spark in one "
        f"session, as the Celery worker keeps it), Spark local[2]; "
        f"CPU per run (median; less moved by other load than wall time): "
        f"Spark {_cpu(m.spark_cpu)} (JVM and driver), baseline {_cpu(m.baseline_cpu)}",
        peer=f"{PEER}, median of {TIMED_RUNS} runs after a warm-up",
        peer_value=round(m.total / statistics.median(m.baseline_runs)),
        rounds=f"Spark {run_times(m.spark_runs)}, peer {run_times(m.baseline_runs)}",
    )


def _cpu(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds:.2f} s"
