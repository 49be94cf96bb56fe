"""Offset reset planning (every ``--reset-offsets`` scenario, refusal on active groups, undo)
and lag (offset and time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.groups import (
    ConsumerGroup,
    InvalidGroupRequestError,
    NonEmptyGroupError,
    OffsetStore,
    PartitionOffsets,
    ResetSpec,
    TopicPartition,
    group_lag,
    offset_lag,
    parse_duration,
    plan_reset,
    time_lag_ms,
    total_lag,
)
from brokernodes.groups.types import OffsetAndMetadata

TP = TopicPartition
P0, P1 = TP("t", 0), TP("t", 1)
# Offsets 10..99 exist; record n has timestamp 1000 * n.
PARTS = {P0: PartitionOffsets(10, 100, 50), P1: PartitionOffsets(10, 100, None)}


def by_time(tp: TopicPartition, ts: int) -> int | None:
    offset = max(10, -(-ts // 1000))
    return offset if offset < 100 else None


def plan(spec, parts=PARTS, now=200_000):
    return plan_reset("g", None, spec, parts, by_time, now)


@pytest.mark.parametrize(
    ("spec", "new0", "new1"),
    [
        (ResetSpec.to_earliest(), 10, 10),
        (ResetSpec.to_latest(), 100, 100),
        (ResetSpec.to_offset(42), 42, 42),
        (ResetSpec.to_offset(5), 10, 10),  # clamped to the log start
        (ResetSpec.to_offset(500), 100, 100),  # clamped to the log end
        (ResetSpec.shift_by(-5), 45, 10),  # no committed offset: from the log start
        (ResetSpec.shift_by(80), 100, 90),
        (ResetSpec.to_datetime(30_500), 31, 31),
        (ResetSpec.to_datetime(datetime.fromtimestamp(20, UTC)), 20, 20),
        (ResetSpec.to_datetime(10**9), 100, 100),  # nothing that late: log end
        (ResetSpec.by_duration(timedelta(seconds=150)), 50, 50),
        (ResetSpec.by_duration("PT2M30S"), 50, 50),
        (ResetSpec.by_duration(1_000), 100, 100),
    ],
)
def test_every_strategy(spec, new0, new1):
    p = plan(spec)
    assert p.offsets() == {P0: new0, P1: new1}


def test_plan_counts_reread_and_skipped_and_keeps_previous():
    back = plan(ResetSpec.to_offset(20)).entries[0]
    assert (back.previous, back.new, back.records_reread, back.records_skipped) == (50, 20, 30, 0)
    fwd = plan(ResetSpec.to_latest())
    assert fwd.entries[0].records_skipped == 50 and fwd.entries[1].records_skipped is None
    assert fwd.to_json()["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "previous_offset": 50,
        "new_offset": 100,
        "log_start_offset": 10,
        "log_end_offset": 100,
        "records_reread": 0,
        "records_skipped": 50,
    }


def test_undo_restores_previous_offsets_and_drops_new_ones():
    store = OffsetStore()
    store.commit("g", {P0: OffsetAndMetadata(50)})
    p = plan(ResetSpec.to_earliest())
    store.commit("g", {tp: OffsetAndMetadata(o) for tp, o in p.offsets().items()})
    undo = p.undo()
    store.commit("g", {tp: OffsetAndMetadata(o) for tp, o in undo.offsets().items()})
    store.delete("g", undo.deletes)
    assert store.fetch("g") == {P0: OffsetAndMetadata(50)}
    assert undo.to_json()["deletes"] == [["t", 1]]


def test_reset_refused_while_the_group_has_members():
    g = ConsumerGroup("g", partition_counts={"t": 2})
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    with pytest.raises(NonEmptyGroupError, match="inactive"):
        plan_reset("g", g, ResetSpec.to_earliest(), PARTS, by_time, 0)
    g.expire(10**9)
    assert plan_reset("g", g, ResetSpec.to_earliest(), PARTS, by_time, 0).offsets()


def test_bad_reset_input():
    with pytest.raises(InvalidGroupRequestError):
        ResetSpec.to_offset(-1)
    with pytest.raises(InvalidGroupRequestError):
        ResetSpec.to_datetime(datetime(2026, 1, 1))  # naive
    with pytest.raises(InvalidGroupRequestError):
        ResetSpec.by_duration(-5)
    for text in ("", "P", "PT", "1H", "PT1X"):
        with pytest.raises(InvalidGroupRequestError):
            parse_duration(text)
    assert parse_duration("P1DT2H3M4.5S") == timedelta(days=1, hours=2, minutes=3, seconds=4.5)
    with pytest.raises(InvalidGroupRequestError):
        plan(ResetSpec.to_earliest(), {P0: PartitionOffsets(10, 5)})


@settings(max_examples=100, deadline=None)
@given(
    start=st.integers(0, 50),
    length=st.integers(0, 50),
    committed=st.one_of(st.none(), st.integers(0, 120)),
    shift=st.integers(-200, 200),
)
def test_plans_stay_in_the_log_and_account_for_every_record(start, length, committed, shift):
    parts = {P0: PartitionOffsets(start, start + length, committed)}
    for spec in (ResetSpec.shift_by(shift), ResetSpec.to_offset(abs(shift))):
        e = plan(spec, parts).entries[0]
        assert start <= e.new <= start + length
        if committed is not None:
            assert e.new - committed == e.records_skipped - e.records_reread


# --- lag -------------------------------------------------------------------------------


def test_offset_and_time_lag():
    assert offset_lag(None, 10) is None
    assert offset_lag(4, 10) == 6 and offset_lag(12, 10) == 0
    ts = {4: 1_000}.get
    assert time_lag_ms(4, 10, ts, 5_000) == 4_000
    assert time_lag_ms(10, 10, ts, 5_000) == 0
    assert time_lag_ms(5, 10, ts, 5_000) is None
    assert time_lag_ms(4, 10, lambda o: 9_000, 5_000) == 0  # clock skew never goes negative
    lags = group_lag({P0: 4, P1: None}, {P0: 10, P1: 3}, lambda tp, o: 1_000, 3_000)
    assert [(pl.offset_lag, pl.time_lag_ms) for pl in lags.values()] == [(6, 2_000), (None, None)]
    assert total_lag(lags) == (6, 2_000)
    assert total_lag({}) == (0, None)
