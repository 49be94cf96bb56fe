"""The Spark benchmark's single-machine baseline (bench/spark_baseline.py) gives exactly the
lag and throughput results the Spark jobs give on the same Parquet input, including records
with null keys and values, headers, and tombstoned commits; its one-pass window evaluation
(bench/burrow_window.py) equals ``burrow.evaluate`` on generated histories."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import spark as bench
from bench import spark_baseline
from bench.burrow_window import evaluate_windows
from bench.spark_baseline import baseline_jobs
from spark.transforms.burrow import Sample, evaluate

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@pytest.fixture
def data(tmp_path):
    bench.generate(tmp_path, 24_000, commit_every_ms=60_000)
    return tmp_path


def _compare(spark, base) -> dict:
    expected = baseline_jobs(base, bench.settings())
    assert bench.differences(expected, bench.spark_jobs(spark, base)) == []
    return expected


def test_baseline_equals_spark(spark, data):
    out = _compare(spark, data)
    statuses = Counter(s[7] for s in out["status"].values())
    assert statuses == {"OK": 24, "STOP": 24, "WARN": 24}  # healthy, stopped, slow
    assert len(out["history"]) > 24 * 3 * 100
    assert sum(n for n, _ in out["minute"].values()) == 24_000
    assert {p for (_, _, p, _) in out["minute"]} == set(range(24))
    for hour in (bench.T0, bench.T0 + bench.HOUR):  # partition 0 has three shares: 72/27 > 2
        assert out["skew"][(bench.TENANT, bench.TOPIC, hour)][3] == 0


def _messy(base) -> int:
    """Null keys and values, headers on every third record, a tombstone commit per partition;
    returns the payload bytes the records now hold, summed in plain Python."""
    total = 0
    for path in sorted((base / "records").glob("*.parquet")):
        t = pq.read_table(path)
        keys = [None if i % 5 == 0 else k for i, k in enumerate(t.column("key").to_pylist())]
        values = [None if i % 7 == 3 else v for i, v in enumerate(t.column("value").to_pylist())]
        headers = [
            [{"key": "trace", "value": b"x" * (i % 11)}, {"key": "é", "value": None}]
            if i % 3 == 0
            else ([] if i % 3 == 1 else None)
            for i in range(t.num_rows)
        ]
        t = t.set_column(t.schema.get_field_index("key"), "key", pa.array(keys, pa.binary()))
        t = t.set_column(t.schema.get_field_index("value"), "value", pa.array(values, pa.binary()))
        t = t.append_column("headers", pa.array(headers, HEADERS))
        pq.write_table(t, path)
        for k, v, hs in zip(keys, values, headers, strict=True):
            total += len(k or b"") + len(v or b"")
            total += sum(len(h["key"].encode()) + len(h["value"] or b"") for h in hs or [])
    commits = pq.read_table(base / "commits.parquet")
    last = commits.slice(commits.num_rows - 24)
    tombstones = last.set_column(
        last.schema.get_field_index("committed_offset"),
        "committed_offset",
        pa.nulls(last.num_rows, pa.int64()),
    )
    pq.write_table(pa.concat_tables([commits, tombstones]), base / "commits.parquet")
    return total


def test_baseline_equals_spark_with_nulls_headers_and_tombstones(spark, data, monkeypatch):
    payload = _messy(data)
    monkeypatch.setattr(spark_baseline, "BATCH_ROWS", 97)  # slots split across many batches
    out = _compare(spark, data)
    assert sum(size for _, size in out["minute"].values()) == payload


def _history(rng: random.Random) -> list[tuple]:
    """(ts, committed, log_end, is_commit, last_commit) samples from a partition's first
    commit: commits that advance, stall, rewind or stop, log-end moves between them, ties in
    time."""
    out, t, end, committed, last_commit = [], 0, rng.randrange(0, 5), None, None
    for _ in range(rng.randrange(1, 60)):
        t += rng.choice((0, 1, 1000, 7000, 30_000, 90_000, 200_000))
        is_commit = committed is None or rng.random() < 0.5
        if is_commit:
            base = committed if committed is not None else 0
            committed = max(0, min(end, base + rng.choice((-3, 0, 0, 2, 10, 100))))
            last_commit = t
        else:
            end += rng.choice((0, 0, 1, 5, 20))
        out.append((t, committed, end, is_commit, last_commit))
    return out


@pytest.mark.parametrize("window", [1, 2, 5, 10])
def test_window_pass_equals_burrow_evaluate(window):
    rng = random.Random(window)
    for _ in range(300):
        h = _history(rng)
        got = evaluate_windows(*zip(*h, strict=True), window=window, min_stop_ms=60_000)
        samples = [Sample(t, c, e, k) for t, c, e, k, _ in h]
        for i, (t, _, _, _, last_commit) in enumerate(h):
            e = evaluate(
                samples[max(0, i - window + 1) : i + 1],
                now_ms=t,
                last_commit_ms=last_commit,
                min_stop_ms=60_000,
            )
            assert got[i] == (e.status, e.consume_rate, e.produce_rate, e.catch_up_s), (h, i)
