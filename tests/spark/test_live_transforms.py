"""The live job's per-micro-batch logic against plain-Python ground truth: the Spark
reductions of a batch (``spark.transforms.live``) and the driver-side merges
(``spark.transforms.live_state``), over generated commits and usage windows split into
micro-batches at random points, with late windows and replays after a "crash"."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from spark.jobs.live import StateLog
from spark.transforms import live
from spark.transforms.live_state import (
    MINUTE_MS,
    LiveState,
    lag_sample,
    merge_commits,
    merge_minutes,
)

T0 = 1_700_000_040_000  # a whole minute
COMMITS_SCHEMA = (
    "group string, topic string, partition int, committed_offset long, leader_epoch int, "
    "metadata string, commit_timestamp timestamp, offset long, timestamp timestamp, "
    "tenant string"
)
USAGE_SCHEMA = (
    "tenant string, principal string, topic string, window_start timestamp, "
    "window_end timestamp, broker_id int, bytes_in long, bytes_out long, records_in long, "
    "records_out long, requests long, throttle_ms long, offset long"
)


def ts(ms):
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def commit_log(rng: random.Random, n: int) -> list[tuple]:
    """``__consumer_offsets`` rows in log order: commits of three groups over two tenants'
    partitions, a few tombstones, commit times that tie."""
    out = []
    for offset in range(n):
        tenant = rng.choice(["t1", "t2", None])
        group, topic, part = (
            rng.choice(["g1", "g2", "g3"]),
            rng.choice(["a", "b"]),
            rng.randrange(3),
        )
        tomb = rng.random() < 0.05
        committed = None if tomb else rng.randrange(1000)
        at = None if tomb else T0 + (offset // 3) * 1000  # three commits per second
        out.append((group, topic, part, committed, 0, "", ts(at), offset, ts(at), tenant))
    return out


def truth_commits(log: list[tuple]) -> dict:
    state = {}
    for group, topic, part, committed, _, _, at, _, _, tenant in log:
        key = (tenant or "", group, topic, part)
        if committed is None:
            state.pop(key, None)
        else:
            state[key] = (committed, int(at.timestamp() * 1000))
    return state


def test_commits_merged_batch_by_batch_equal_the_whole_log(spark):
    rng = random.Random(7)
    log = commit_log(rng, 400)
    cuts = sorted(rng.sample(range(1, len(log)), 5))
    state: dict = {}
    for a, b in zip([0, *cuts], [*cuts, len(log)], strict=True):
        df = spark.createDataFrame(log[a:b], COMMITS_SCHEMA)
        state = merge_commits(state, live.latest_commits(df).toArrow().to_pylist())
    assert state == truth_commits(log)


def test_lag_sample_carries_each_partition_forward_and_sums_per_group():
    commits = {
        ("t1", "g", "a", 0): (10, T0),
        ("t1", "g", "a", 1): (5, T0 - 3_600_000),  # an hour old: still counts
        ("t1", "g", "b", 0): (7, T0),
        ("t1", "g", "gone", 0): (1, T0),  # not a known topic: no row
        ("t2", "h", "a", 0): (3, T0),
    }
    ends = {
        ("t1", "a"): {0: 15, 1: 5, 2: 9},
        ("t1", "b"): {0: None},  # its leader did not answer
        ("t2", "a"): {0: 2},  # a committed offset past the sampled end: lag 0
    }
    now = T0 + 90_000
    parts, groups = lag_sample(commits, ends, now)
    lag = {(p["tenant"], p["group"], p["topic"], p["partition"]): p["offset_lag"] for p in parts}
    assert lag == {
        ("t1", "g", "a", 0): 5,
        ("t1", "g", "a", 1): 0,
        ("t1", "g", "b", 0): None,
        ("t2", "h", "a", 0): 0,
    }
    assert {p["minute_ms"] for p in parts} == {T0 + MINUTE_MS}
    by = {(g["tenant"], g["group"], g["topic"]): g for g in groups}
    assert by[("t1", "g", "a")]["offset_lag"] == 5
    assert (by[("t1", "g", "a")]["partitions"], by[("t1", "g", "a")]["measured"]) == (2, 2)
    assert by[("t1", "g", "a")]["topic_partitions"] == 3
    # nothing measured: null, not 0
    assert by[("t1", "g", "b")]["offset_lag"] is None and by[("t1", "g", "b")]["measured"] == 0
    assert by[("t2", "h", "a")]["offset_lag"] == 0


def usage_windows(rng: random.Random, n: int) -> list[tuple]:
    """Broker windows in arrival order: mostly recent minutes, some late, some without a
    topic (metadata requests) or start."""
    out = []
    for offset in range(n):
        minute = T0 + (offset // 20) * MINUTE_MS  # time moves on as windows arrive
        if rng.random() < 0.1:
            minute -= rng.choice([5, 45, 90]) * MINUTE_MS  # late: some within the lateness
        start = minute + rng.randrange(60) * 1000
        topic = rng.choice(["a", "b", "b", ""])
        ri, ro = rng.randrange(100), rng.randrange(100)
        out.append(
            (
                rng.choice(["t1", "t2"]),
                "User:app",
                topic,
                ts(start) if rng.random() > 0.02 else None,
                ts(start + 60_000),
                rng.randrange(1, 4),
                ri * 10,
                ro * 10,
                ri,
                ro,
                1,
                0,
                offset,
            )
        )
    return out


def minutes_of(batch: list[tuple]) -> list[dict]:
    """Plain-Python ``usage_minutes``."""
    out: dict = {}
    for tenant, _, topic, start, _, _, bi, bo, ri, ro, _, _, _ in batch:
        if not topic or start is None:
            continue
        ms = int(start.timestamp() * 1000)
        key = (tenant or "", topic, ms - ms % MINUTE_MS)
        out[key] = [
            a + b for a, b in zip(out.get(key, [0, 0, 0, 0]), (ri, bi, ro, bo), strict=True)
        ]
    return [
        {"tenant": t, "topic": tp, "minute_ms": m, **dict(zip(live.USAGE_SUMS, v, strict=True))}
        for (t, tp, m), v in out.items()
    ]


def test_usage_minutes_equal_plain_python(spark):
    batch = usage_windows(random.Random(3), 300)
    got = live.usage_minutes(spark.createDataFrame(batch, USAGE_SCHEMA)).toArrow().to_pylist()
    key = lambda r: (r["tenant"], r["topic"], r["minute_ms"])  # noqa: E731
    assert sorted(got, key=key) == sorted(minutes_of(batch), key=key)


def test_minutes_stored_by_upsert_are_the_accepted_sums_even_with_replays(tmp_path):
    """Each batch's rows upserted into a dict (the sink) equal the sums of every window not
    dropped as late; a batch run again after a "crash" (from the state saved before it)
    writes the same values: nothing is counted twice."""
    rng = random.Random(11)
    windows = usage_windows(rng, 1200)
    cuts = sorted(rng.sample(range(1, len(windows)), 30))
    lateness = 30 * MINUTE_MS
    store: dict = {}
    states = StateLog(tmp_path / "state")
    accepted: dict = {}
    dropped = 0
    newest = None
    for batch_id, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(windows)], strict=True)):
        batch = minutes_of(windows[a:b])
        for attempt in range(2 if batch_id % 7 == 3 else 1):  # some batches run twice
            state = states.load_before(batch_id)
            merged = merge_minutes(state.minutes, state.max_minute_ms, batch, lateness_ms=lateness)
            for r in merged.rows:
                store[(r["tenant"], r["topic"], r["minute_ms"])] = tuple(
                    r[c] for c in live.USAGE_SUMS
                )
            if attempt == 0 and batch_id % 7 == 3:
                continue  # "crashed" before its state was saved: Spark runs it again
            states.save(
                batch_id,
                LiveState(minutes=merged.minutes, max_minute_ms=merged.max_minute_ms),
            )
        # ground truth: the watermark is the newest minute before this batch less lateness
        mark = None if newest is None else newest - lateness
        for r in batch:
            key = (r["tenant"], r["topic"], r["minute_ms"])
            if mark is not None and r["minute_ms"] < mark:
                dropped += 1
                continue
            accepted[key] = tuple(
                x + r[c]
                for x, c in zip(accepted.get(key, (0, 0, 0, 0)), live.USAGE_SUMS, strict=True)
            )
            newest = max(newest or r["minute_ms"], r["minute_ms"])
    assert dropped > 0  # the workload has windows older than the lateness
    assert store == accepted
    assert len(list((tmp_path / "state").glob("*.json"))) <= 3


def test_state_survives_its_json_form():
    s = LiveState(
        commits={("t", "g", "a", 0): (5, T0), ("t", "g", "a", 1): (6, None)},
        minutes={("t", "a", T0): (1, 2, 3, 4)},
        max_minute_ms=T0,
        measured_from_ms=T0 - 1,
    )
    assert LiveState.from_doc(s.to_doc()) == s
    assert LiveState.from_doc(None) == LiveState()
