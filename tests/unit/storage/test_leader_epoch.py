"""LeaderEpochFileCache: Kafka's assign / truncate / endOffsetFor rules, persisted."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import KafkaStorageError
from brokernodes.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)

E = EpochEntry
UNDEF = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(*pairs, path=None):
    c = LeaderEpochFileCache(path)
    for epoch, start in pairs:
        c.assign(epoch, start)
    return c


# --- assign -----------------------------------------------------------------------------------


def test_empty_cache():
    c = LeaderEpochFileCache(None)
    assert c.entries == []
    assert c.latest_epoch is None
    assert c.latest_entry is None and c.earliest_entry is None
    assert c.epoch_for_offset(0) is None
    assert c.end_offset_for(0, 10) == UNDEF
    assert c.is_empty()


def test_assign_appends_new_epochs_in_order():
    c = cache_with((0, 0), (1, 5), (3, 9))
    assert c.entries == [E(0, 0), E(1, 5), E(3, 9)]
    assert c.latest_epoch == 3
    assert c.previous_epoch() == 1
    assert c.earliest_entry == E(0, 0)


def test_assign_same_epoch_higher_or_equal_offset_is_ignored():
    c = cache_with((2, 10))
    assert c.assign(2, 10) is False
    assert c.assign(2, 15) is False
    assert c.entries == [E(2, 10)]


def test_assign_same_epoch_lower_offset_moves_start_back():
    c = cache_with((1, 0), (2, 10))
    assert c.assign(2, 7) is True
    assert c.entries == [E(1, 0), E(2, 7)]


def test_assign_new_epoch_with_lower_start_removes_conflicting_entries():
    c = cache_with((0, 0), (1, 10), (2, 20))
    assert c.assign(3, 15) is True
    assert c.entries == [E(0, 0), E(1, 10), E(3, 15)]


def test_assign_new_epoch_same_start_replaces_empty_epoch():
    c = cache_with((0, 0), (1, 10))
    c.assign(2, 10)  # epoch 1 never got a record
    assert c.entries == [E(0, 0), E(2, 10)]


def test_assign_lower_epoch_truncates_later_epochs_like_kafka():
    c = cache_with((0, 0), (2, 10), (4, 20))
    assert c.assign(3, 30) is True
    assert c.entries == [E(0, 0), E(2, 10), E(3, 30)]


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1)])
def test_assign_rejects_negative(epoch, start):
    with pytest.raises(ValueError):
        LeaderEpochFileCache(None).assign(epoch, start)


# --- lookups ----------------------------------------------------------------------------------


def test_epoch_for_offset():
    c = cache_with((1, 5), (3, 9), (4, 20))
    assert c.epoch_for_offset(4) is None
    assert c.epoch_for_offset(5) == 1
    assert c.epoch_for_offset(8) == 1
    assert c.epoch_for_offset(9) == 3
    assert c.epoch_for_offset(19) == 3
    assert c.epoch_for_offset(20) == 4
    assert c.epoch_for_offset(10**12) == 4


def test_end_offset_for():
    c = cache_with((1, 5), (3, 9), (4, 20))
    leo = 33
    assert c.end_offset_for(4, leo) == (4, leo)  # latest -> log end offset
    assert c.end_offset_for(3, leo) == (3, 20)
    assert c.end_offset_for(2, leo) == (1, 9)  # unknown epoch between -> floor epoch
    assert c.end_offset_for(1, leo) == (1, 9)
    assert c.end_offset_for(0, leo) == (0, 5)  # below earliest -> requested, first start
    assert c.end_offset_for(5, leo) == UNDEF  # above latest
    assert c.end_offset_for(UNDEFINED_EPOCH, leo) == UNDEF


# --- truncation -------------------------------------------------------------------------------


def test_truncate_from_end():
    c = cache_with((0, 0), (1, 5), (2, 10))
    assert c.truncate_from_end(11) is False
    assert c.truncate_from_end(10) is True
    assert c.entries == [E(0, 0), E(1, 5)]
    assert c.truncate_from_end(3) is True
    assert c.entries == [E(0, 0)]
    assert c.truncate_from_end(-1) is False
    assert c.truncate_from_end(0) is True
    assert c.entries == []


def test_truncate_from_start():
    c = cache_with((0, 0), (1, 5), (2, 10))
    assert c.truncate_from_start(7) is True
    assert c.entries == [E(1, 7), E(2, 10)]
    assert c.truncate_from_start(7) is False
    assert c.truncate_from_start(3) is False
    assert c.truncate_from_start(10) is True
    assert c.entries == [E(2, 10)]
    assert c.truncate_from_start(50) is True
    assert c.entries == [E(2, 50)]


def test_clear():
    c = cache_with((0, 0), (1, 5))
    c.clear()
    assert c.entries == []


# --- persistence ------------------------------------------------------------------------------


def test_changes_are_checkpointed_and_reloaded(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME
    c = cache_with((0, 0), (1, 5), (2, 10), path=path)
    assert path.read_text() == "0\n3\n0 0\n1 5\n2 10\n"
    c.truncate_from_end(10)
    c.truncate_from_start(2)
    assert LeaderEpochFileCache(path).entries == [E(0, 2), E(1, 5)]
    c.clear()
    assert path.read_text() == "0\n0\n"
    assert LeaderEpochFileCache(path).entries == []


def test_missing_file_is_an_empty_cache(tmp_path):
    c = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME)
    assert c.entries == []
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME).exists()


def test_non_monotonic_file_is_sanitised_on_load(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME
    path.write_text("0\n3\n0 0\n2 10\n1 20\n")
    assert LeaderEpochFileCache(path).entries == [E(0, 0), E(1, 20)]


def test_malformed_file_raises_storage_error(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME
    path.write_text("0\n1\n0 zero\n")
    with pytest.raises(KafkaStorageError, match="line 3"):
        LeaderEpochFileCache(path)


def test_no_op_does_not_rewrite_file(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILENAME
    c = cache_with((1, 5), path=path)
    path.write_text("0\n1\n1 5\n")
    mtime = path.stat().st_mtime_ns
    c.assign(1, 6)
    c.truncate_from_end(100)
    c.truncate_from_start(1)
    assert path.stat().st_mtime_ns == mtime


# --- property test against a naive model ------------------------------------------------------


class Model:
    """Kafka 2.x's formulation: filters over the whole list instead of trimming the tail."""

    def __init__(self):
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch, start):
        if self.entries:
            le, ls = self.entries[-1]
            if le == epoch and start >= ls:
                return
        self.entries = [(e, s) for e, s in self.entries if e < epoch and s < start]
        self.entries.append((epoch, start))

    def truncate_from_end(self, end):
        if end >= 0:
            self.entries = [(e, s) for e, s in self.entries if s < end]

    def truncate_from_start(self, start):
        before = [(e, s) for e, s in self.entries if s <= start]
        after = [(e, s) for e, s in self.entries if s > start]
        self.entries = ([(before[-1][0], start)] if before else []) + after

    def epoch_for_offset(self, offset):
        found = None
        for e, s in self.entries:
            if s <= offset:
                found = e
        return found

    def end_offset_for(self, requested, leo):
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEF
        if self.entries[-1][0] == requested:
            return requested, leo
        later = [(e, s) for e, s in self.entries if e > requested]
        earlier = [(e, s) for e, s in self.entries if e <= requested]
        if not later:
            return UNDEF
        if not earlier:
            return requested, later[0][1]
        return earlier[-1][0], later[0][1]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("assign_next"), st.integers(0, 3), st.integers(0, 10)),
        st.tuples(st.just("truncate_from_end"), st.integers(-1, 60)),
        st.tuples(st.just("truncate_from_start"), st.integers(0, 60)),
        st.tuples(st.just("clear")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops, st.data())
def test_cache_matches_model(tmp_path_factory, operations, data):
    path = tmp_path_factory.mktemp("epochs") / LEADER_EPOCH_CHECKPOINT_FILENAME
    cache = LeaderEpochFileCache(path)
    model = Model()
    for op in operations:
        name = op[0]
        if name == "assign_next":  # the common case: a newer epoch at a later offset
            last = model.entries[-1] if model.entries else (0, 0)
            args = (last[0] + op[1], last[1] + op[2])
            cache.assign(*args)
            model.assign(*args)
        elif name == "clear":
            cache.clear()
            model.entries = []
        else:
            getattr(cache, name)(*op[1:])
            getattr(model, name)(*op[1:])
        entries = cache.entries
        assert [tuple(e) for e in entries] == model.entries
        assert all(a.epoch < b.epoch for a, b in itertools.pairwise(entries))
        assert all(a.start_offset < b.start_offset for a, b in itertools.pairwise(entries))
    assert LeaderEpochFileCache(path).entries == cache.entries
    leo = 61
    for offset in range(0, 62, 3):
        assert cache.epoch_for_offset(offset) == model.epoch_for_offset(offset)
    for epoch in range(-1, 14):
        assert cache.end_offset_for(epoch, leo) == model.end_offset_for(epoch, leo)
    extra = data.draw(st.integers(-1, 20))
    assert cache.end_offset_for(extra, leo) == model.end_offset_for(extra, leo)
