"""Offset commits (validation, the store) and the ``__consumer_offsets`` records: encoding,
snapshots and diffs, and the loader a new coordinator runs after failover."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from brokernodes.groups import (
    ConsumerGroup,
    GroupIdNotFoundError,
    InvalidGroupRequestError,
    NonEmptyGroupError,
    OffsetAndMetadata,
    OffsetKey,
    OffsetStore,
    StaleMemberEpochError,
    TopicPartition,
    UnknownMemberIdError,
    delete_group,
    group_records,
    group_tombstones,
    load_records,
    record_diff,
    validate_commit,
)
from brokernodes.groups.records import (
    GROUP_METADATA,
    OFFSET_COMMIT,
    decode_key,
    decode_value,
    encode_offset_commit,
    encode_offset_key,
)

TP = TopicPartition


def group_with_two_members() -> ConsumerGroup:
    ids = (f"m{i}" for i in itertools.count(1))
    g = ConsumerGroup(
        "g",
        partition_counts={"t": 4},
        session_timeout_ms=10_000,
        member_id_factory=lambda: next(ids),
    )
    a = g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-a")
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat("m1", 1, 0, owned=a.assignment)  # m1 is now revoking two partitions
    return g


# --- validate_commit -------------------------------------------------------------------


def test_member_commit_at_the_current_epoch_passes():
    g = group_with_two_members()
    validate_commit(g, "m2", 2, {TP("t", 0): 5}, log_end_offsets={TP("t", 0): 5})
    # A member still revoking commits at its current (old) epoch, as KIP-848 expects.
    validate_commit(g, "m1", 1, {TP("t", 1): OffsetAndMetadata(3)})


def test_zombie_commits_are_refused():
    g = group_with_two_members()
    with pytest.raises(StaleMemberEpochError):
        validate_commit(g, "m2", 1, {TP("t", 0): 5})
    with pytest.raises(UnknownMemberIdError):
        validate_commit(g, "gone", 2, {TP("t", 0): 5})
    g.expire(10_000)
    with pytest.raises(UnknownMemberIdError):
        validate_commit(g, "m2", 2, {TP("t", 0): 5})


def test_bad_offsets_and_groups():
    g = group_with_two_members()
    ends = {TP("t", 0): 10}
    with pytest.raises(InvalidGroupRequestError, match="non-negative"):
        validate_commit(g, "m2", 2, {TP("t", 0): -1})
    with pytest.raises(OffsetOutOfRangeError, match="beyond the log end offset 10"):
        validate_commit(None, None, -1, {TP("t", 0): 11}, log_end_offsets=ends, group_id="g")
    # a member commits what it fetched: a new leader's end trailing the old one's (right
    # after a failover) must not refuse it
    validate_commit(g, "m2", 2, {TP("t", 0): 11}, log_end_offsets=ends)
    with pytest.raises(UnknownTopicOrPartitionError):
        validate_commit(g, "m2", 2, {TP("u", 0): 1}, log_end_offsets=ends)
    with pytest.raises(GroupIdNotFoundError):
        validate_commit(None, "m1", 1, {}, group_id="nope")
    with pytest.raises(NonEmptyGroupError):
        validate_commit(g, None, -1, {TP("t", 0): 1})
    validate_commit(None, None, -1, {TP("t", 0): 1}, group_id="fresh")  # admin commit


# --- the store and its records ---------------------------------------------------------


def test_store_commit_fetch_delete_and_reload():
    store = OffsetStore()
    recs = store.commit("g", {TP("t", 1): OffsetAndMetadata(7, 3, "meta", 99)})
    recs += store.commit("h", {TP("t", 1): OffsetAndMetadata(1)})
    assert store.fetch("g") == {TP("t", 1): OffsetAndMetadata(7, 3, "meta", 99)}
    assert store.fetch("g", [TP("t", 2)]) == {}
    assert store.groups() == {"g", "h"}
    recs += store.delete("h")
    assert store.fetch("h") == {} and recs[-1][1] is None
    loaded = load_records(recs, now_ms=0)
    assert loaded.offsets == store.offsets


def test_offset_key_bytes_are_kafka_shaped():
    key = encode_offset_key(OffsetKey("g", "t", 3))
    assert key == struct.pack(">hh", OFFSET_COMMIT, 1) + b"g" + struct.pack(">h", 1) + b"t" + (
        struct.pack(">i", 3)
    )
    assert decode_key(key) == (OFFSET_COMMIT, ("g", "t", 3))
    _, value = encode_offset_commit(OffsetKey("g", "t", 3), OffsetAndMetadata(5))
    assert value[:2] == b"\x00\x00"
    assert decode_value(value) == {
        "offset": 5,
        "leader_epoch": None,
        "metadata": "",
        "commit_timestamp_ms": 0,
    }


@pytest.mark.parametrize(
    "key",
    [
        b"",
        b"\x00\x09\x00\x01g",
        b"\x00\x01\x00\x05g",
        struct.pack(">hh", GROUP_METADATA, 1) + b"gX",
    ],
)
def test_garbage_keys_are_refused(key):
    with pytest.raises(CorruptRecordError):
        decode_key(key)


def test_garbage_values_are_refused():
    for value in (b"", b"\x00\x07{}", b"\x00\x00[1]", b"\x00\x00{"):
        with pytest.raises(CorruptRecordError):
            decode_value(value)


def test_group_snapshot_round_trips_and_the_new_coordinator_carries_on():
    g = group_with_two_members()
    recs = list(group_records(g).items())
    state = load_records(recs, now_ms=50_000)
    h = state.groups["g"]
    assert h.describe() == g.describe()
    assert h.owners == g.owners
    assert h.members["m1"].session_deadline_ms == 60_000  # a fresh session after failover
    # Reconciliation continues where it was: m1 releases, m2 then gets its partitions.
    r1 = h.heartbeat("m1", 1, 50_001, owned=h.members["m1"].assigned)
    r2 = h.heartbeat("m2", 2, 50_002, owned=[])
    assert r1.member_epoch == 2 and len(r2.assignment) == 2
    assert group_records(load_records(group_records(h).items(), 0).groups["g"]) == (
        group_records(h)
    )


def test_diffs_and_tombstones_replay_to_the_latest_state():
    g = group_with_two_members()
    log = list(group_records(g).items())
    snap = group_records(g)
    g.leave("m2", 1)
    log += record_diff(snap, group_records(g))
    assert any(v is None for _, v in log), "the departed member's records are tombstoned"
    assert set(load_records(log, 0).groups["g"].members) == {"m1"}
    log += group_tombstones(g)
    assert load_records(log, 0).groups == {}
    assert record_diff(snap, snap) == []


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["g", "h", "ü"]),
            st.sampled_from(["t", "u"]),
            st.integers(0, 3),
            st.one_of(st.none(), st.integers(0, 2**62)),
        ),
        max_size=30,
    )
)
def test_loader_matches_the_last_write_per_key(ops):
    store, log = OffsetStore(), []
    for group, topic, partition, offset in ops:
        if offset is None:
            log += store.delete(group, [TP(topic, partition)])
        else:
            log += store.commit(group, {TP(topic, partition): OffsetAndMetadata(offset)})
    assert load_records(log, 0).offsets == store.offsets


def test_delete_group_needs_an_inactive_existing_group():
    g = group_with_two_members()
    store = OffsetStore()
    store.commit("g", {TP("t", 0): OffsetAndMetadata(1)})
    with pytest.raises(NonEmptyGroupError):
        delete_group("g", g, store)
    with pytest.raises(GroupIdNotFoundError):
        delete_group("nope", None, store)
    log = list(group_records(g).items())
    log.append(encode_offset_commit(OffsetKey("g", "t", 0), OffsetAndMetadata(1)))
    g.expire(10**9)
    log += delete_group("g", g, store)
    assert store.fetch("g") == {}
    loaded = load_records(log, 0)
    assert loaded.offsets == {} and loaded.groups == {}
