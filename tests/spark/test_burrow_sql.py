"""The Spark SQL form of the lag rules (``burrow_sql``) against the plain-Python reference
(``burrow.evaluate``) on generated sample histories: every sample's evaluation over its
window, and the evaluation at ``now`` with a log start."""

from __future__ import annotations

import random

import pytest

from spark.transforms import lag
from spark.transforms.burrow import Sample, evaluate

WINDOW, MIN_STOP = 5, 20_000
SCHEMA = (
    "tenant string, group string, topic string, partition int, ts_ms long, "
    "committed_offset long, log_end_offset long, offset_lag long, time_lag_ms long, "
    "is_commit boolean, last_commit_ms long"
)


def _history(rng: random.Random, key: int) -> list[tuple]:
    """A partition's samples: commits that advance, stall, rewind or stop, and log-end moves
    in between (ties in time included)."""
    rows, t, end, committed, last_commit = [], 0, rng.randrange(0, 5), None, None
    for _ in range(rng.randrange(3, 40)):
        t += rng.choice((0, 1, 1000, 1000, 7000, 30_000, 90_000, 90_000))
        if rng.random() < 0.5:
            end += rng.choice((0, 0, 1, 5, 20))
            kind = False
        else:
            base = committed if committed is not None else 0
            committed = max(0, min(end, base + rng.choice((-3, 0, 0, 2, 10, 100))))
            last_commit, kind = t, True
        if committed is None:
            continue
        rows.append(
            ("", f"g{key}", "t", key, t, committed, end, max(end - committed, 0), 0, kind,
             last_commit)
        )  # fmt: skip
    return sorted(rows, key=lambda r: (r[4], r[9]))  # the samples' order (stable)


def _python(rows: list[tuple], *, now=None, log_start=None) -> list[tuple]:
    window = [Sample(r[4], r[5], r[6], r[9]) for r in rows]
    out = []
    for i, r in enumerate(rows):
        if now is not None and i != len(rows) - 1:
            continue
        e = evaluate(
            window[max(0, i - WINDOW + 1) : i + 1],
            now_ms=r[4] if now is None else now,
            last_commit_ms=r[10],
            min_stop_ms=MIN_STOP,
            log_start_offset=log_start,
        )
        out.append((r[3], r[4], r[9], e.status, e.consume_rate, e.produce_rate, e.catch_up_s))
    return out


def _same(a: tuple, b: tuple) -> bool:
    return all(
        x == pytest.approx(y, rel=1e-12) if isinstance(x, float) and y is not None else x == y
        for x, y in zip(a, b, strict=True)
    )


def test_sql_rules_agree_with_the_python_reference(spark):
    rng = random.Random(8)
    histories = {p: _history(rng, p) for p in range(80)}
    histories = {p: h for p, h in histories.items() if h}
    rows = [r for h in histories.values() for r in h]
    df = spark.createDataFrame(rows, SCHEMA)
    got: dict = {}
    for r in lag.evaluate_history(df, window=WINDOW, min_stop_ms=MIN_STOP).collect():
        got.setdefault(r.partition, []).append(
            (r.partition, r.ts_ms, r.is_commit, r.status, r.consume_rate, r.produce_rate,
             r.catch_up_s)
        )  # fmt: skip
    # samples with equal (ts, is_commit) keep their input order in Python but not in Spark;
    # such histories are compared by their statuses only
    compared, statuses = 0, set()
    for p, h in histories.items():
        want = _python(h)
        statuses |= {w[3] for w in want}
        assert len(got[p]) == len(want)
        if len({(r[4], r[9]) for r in h}) != len(h):
            assert sorted(g[3] for g in got[p]) == sorted(w[3] for w in want)
            continue
        by_key = {g[1:3]: g for g in got[p]}
        for w in want:
            assert _same(by_key[w[1:3]], w), (by_key[w[1:3]], w)
            compared += 1
    assert compared > 250 and {"OK", "STOP", "STALL", "REWIND", "WARN"} <= statuses
    now = max(r[4] for r in rows) + 45_000
    starts = spark.createDataFrame(
        [("", "t", p, 3) for p in histories],
        "tenant string, topic string, partition int, log_start_offset long",
    )
    status = {
        r.partition: (r.partition, r.sampled_ms, True, r.status, r.consume_rate,
                      r.produce_rate, r.catch_up_s)
        for r in lag.lag_status(
            df, now_ms=now, log_starts=starts, window=WINDOW, min_stop_ms=MIN_STOP
        ).collect()
    }  # fmt: skip
    for p, h in histories.items():
        (w,) = _python(h, now=now, log_start=3)
        g = status[p]
        if len({(r[4], r[9]) for r in h}) == len(h):
            assert _same(g[:2] + g[3:], w[:2] + w[3:]), (g, w)
    assert {s[3] for s in status.values()} >= {"ERR", "STOP"}
