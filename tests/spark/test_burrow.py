"""The lag evaluation rules (plain Python), one case per status."""

from __future__ import annotations

import pytest

from spark.transforms.burrow import Sample, evaluate


def commits(*pairs, start=0, every=10_000):
    """(committed, log_end) per commit, every 10 s."""
    return [Sample(start + i * every, c, e, True) for i, (c, e) in enumerate(pairs)]


def ev(window, now=None, min_stop_ms=60_000, log_start=None, last_commit=None):
    commits_ = [s for s in window if s.is_commit]
    last_commit = last_commit if last_commit is not None else commits_[-1].ts_ms
    now = now if now is not None else window[-1].ts_ms
    return evaluate(
        window,
        now_ms=now,
        last_commit_ms=last_commit,
        min_stop_ms=min_stop_ms,
        log_start_offset=log_start,
    )


def test_caught_up_is_ok():
    assert ev(commits((10, 10), (20, 20), (30, 30))).status == "OK"


def test_behind_but_keeping_up_is_ok():
    e = ev(commits((5, 10), (15, 20), (22, 30), (35, 40)))
    assert e.status == "OK"
    assert e.consume_rate == pytest.approx(1.0) and e.produce_rate == pytest.approx(1.0)


def test_lag_growing_at_every_commit_warns_and_never_catches_up():
    e = ev(commits((5, 10), (10, 20), (15, 30), (20, 40)))
    assert e.status == "WARN"
    assert e.catch_up_s is None  # consuming 0.5/s against 1/s produced


def test_catch_up_estimate_when_the_consumer_is_faster():
    e = ev(commits((0, 100), (30, 110), (60, 120)))
    assert e.status == "OK"
    # 3/s consumed, 1/s produced, 60 behind: 30 s
    assert e.catch_up_s == pytest.approx(30.0)


def test_committing_the_same_offset_with_lag_is_stall():
    assert ev(commits((7, 10), (7, 20), (7, 30))).status == "STALL"


def test_an_offset_going_back_is_rewind():
    assert ev(commits((10, 10), (20, 20), (5, 30), (15, 40))).status == "REWIND"


def test_no_commit_for_longer_than_the_window_is_stop_even_at_zero_lag_then():
    """Burrow's blind spot: the last commits had no lag, but the log end moved since."""
    window = [*commits((10, 10), (20, 20)), Sample(200_000, 20, 50, False)]
    assert ev(window, now=200_000).status == "STOP"
    # with commits only (what Burrow sees) the same consumer looks healthy
    assert ev(commits((10, 10), (20, 20)), now=200_000).status == "OK"


def test_stop_waits_for_the_minimum():
    window = [*commits((10, 10), (20, 20)), Sample(40_000, 20, 50, False)]
    assert ev(window, now=40_000).status != "STOP"
    assert ev(window, now=40_000, min_stop_ms=5_000).status == "STOP"


def test_behind_the_log_start_is_err():
    assert ev(commits((10, 50), (10, 60)), log_start=20).status == "ERR"


def test_an_empty_window_is_ok():
    assert evaluate([], now_ms=0, last_commit_ms=None, min_stop_ms=1).status == "OK"
