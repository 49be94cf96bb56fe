"""The pure statistics of bench/quotas.py: the interleaved schedule, grouping by slot, the
nearest-rank quantile and the slot bootstrap."""

from __future__ import annotations

import random

from bench.quotas import (
    CYCLE,
    away_from,
    bootstrap_ratio,
    by_slot,
    interleaved_slots,
    quantile,
    windows,
)


def test_each_cycle_holds_the_cycle_s_slots_in_some_order():
    n = len(CYCLE)
    slots = interleaved_slots(50)
    assert len(slots) == 50 * n
    cycles = [tuple(slots[i : i + n]) for i in range(0, 50 * n, n)]
    assert all(sorted(c) == sorted(CYCLE) for c in cycles)
    assert len(set(cycles)) > 1  # shuffled
    assert interleaved_slots(50) == slots  # seeded: the same schedule every run


def test_loaded_windows_merge_adjacent_slots():
    slots = ["loaded", "loaded", "unloaded", "unloaded", "loaded", "unloaded", "loaded"]
    assert windows(10.0, slots) == [(10.0, 12.0), (14.0, 15.0), (16.0, 17.0)]


def test_samples_go_to_their_slot_and_edges_are_dropped():
    samples = [(100.05, 1.0), (100.5, 2.0), (100.9, 3.0), (101.2, 4.0), (102.5, 5.0), (99.5, 6.0)]
    assert by_slot(samples, start=100.0, n_slots=2, guard_s=0.15) == [[2.0], [4.0]]


def test_nearest_rank_quantile():
    xs = list(range(1, 101))
    random.Random(1).shuffle(xs)
    assert quantile(xs, 0.99) == 99
    assert quantile(xs, 0.5) == 50
    assert quantile(xs, 1.0) == 100
    assert quantile([7.0], 0.99) == 7.0


def test_bootstrap_interval_brackets_the_true_ratio():
    rng = random.Random(3)
    unloaded = [[rng.expovariate(1.0) for _ in range(100)] for _ in range(40)]
    loaded = [[1.5 * x for x in slot] for slot in unloaded]  # exactly 1.5x, slot by slot
    lo, hi = bootstrap_ratio(loaded, unloaded, reps=200)
    assert lo < 1.5 < hi
    same_lo, same_hi = bootstrap_ratio(unloaded, unloaded, reps=200)
    assert same_lo < 1.0 < same_hi


def test_away_from_keeps_only_samples_with_no_event_nearby():
    samples = [(1.000, 0.001), (1.010, 0.001), (1.020, 0.001)]
    events = [1.0105, 1.0215]  # inside the second sample; 0.5 ms after the third one ends
    assert away_from(samples, events) == [0.001]
    assert away_from(samples, [1.0025]) == [0.001] * 3  # 1.5 ms after the first one ends
    assert away_from(samples, [1.0075]) == [0.001, 0.001]  # 2.5 ms before the second starts
    assert away_from(samples, []) == [0.001] * 3
