"""The log side of transactions, pure cores and real files: producer state's open
transactions and LSO, the ``.txnindex`` (read, write, truncation, retention, recovery)."""

from __future__ import annotations

import os

import pytest

from brokernodes.errors import InvalidProducerEpochError, KafkaStorageError, ProducerFencedError
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.control import TxnMarker, encode_txn_marker
from brokernodes.records.header import CONTROL_BIT, TRANSACTIONAL_BIT
from brokernodes.server.replica.partition import Partition
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from brokernodes.storage.producer_state import CompletedTxn, ProducerStateManager
from brokernodes.storage.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex, decode, encode
from tests.unit.storage.test_producer_state import header

TXN = TRANSACTIONAL_BIT
MARKER = TRANSACTIONAL_BIT | CONTROL_BIT


def txn_batch(pid, seq, base_offset, count=1, epoch=0):
    return header(pid, epoch, seq, count, base_offset, attributes=TXN)


def marker(pid, base_offset, epoch=0):
    return header(pid, epoch, -1, 1, base_offset, attributes=MARKER)


def as_marker(h, commit, coordinator_epoch=0):
    return TxnMarker(h.producer_id, h.producer_epoch, commit, coordinator_epoch, 0, h.base_offset)


# --- producer state: open transactions and the LSO ----------------------------------------


def test_open_transaction_holds_the_lso_until_its_marker_is_below_the_hw():
    state = ProducerStateManager()
    state.update(header(1, 0, 0, 2, 0))  # idempotent, not transactional: offsets 0-1
    state.update(txn_batch(2, 0, 2, 3))  # 2-4 open
    state.update(txn_batch(2, 3, 5, 1))  # same transaction
    assert state.ongoing_transactions == {2: 2}
    assert state.last_stable_offset(high_watermark=6) == 2
    assert state.last_stable_offset(high_watermark=1) == 1  # capped by the HW
    done = state.update(marker(2, 6), commit=True)
    assert done == CompletedTxn(2, 2, 6, aborted=False)
    assert state.ongoing_transactions == {}
    # the marker is not replicated yet (HW 6 <= marker offset 6): still unstable
    assert state.last_stable_offset(high_watermark=6) == 2
    assert state.last_stable_offset(high_watermark=7) == 7
    assert state.first_unstable_offset is None


def test_lso_is_the_earliest_open_transaction_of_several_producers():
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0))
    state.update(txn_batch(2, 0, 1))
    state.update(txn_batch(1, 1, 2))
    assert state.last_stable_offset(10) == 0
    state.update(marker(1, 3), commit=False)
    assert state.last_stable_offset(10) == 1  # producer 2's from offset 1
    state.update(marker(2, 4), commit=True)
    assert state.last_stable_offset(10) == 10
    # a new transaction of producer 1 opens at its next transactional batch
    state.update(txn_batch(1, 2, 11))
    assert state.ongoing_transactions == {1: 11}


def test_abort_entry_names_the_transaction_and_the_lso_after_it():
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0))
    state.update(txn_batch(2, 0, 1))
    txn = state.update(marker(1, 2), commit=False)
    assert txn.aborted
    # producer 2 still open from offset 1: the LSO once the abort is written
    assert state.aborted_entry(txn) == AbortedTxn(1, 0, 2, 1)
    txn2 = state.update(marker(2, 3), commit=False)
    assert state.aborted_entry(txn2) == AbortedTxn(2, 1, 3, 4)


def test_marker_without_an_open_transaction_ends_nothing():
    state = ProducerStateManager()
    assert state.update(marker(5, 0), commit=True) is None
    assert state.last_entry(5).producer_epoch == 0
    # a control batch whose marker could not be read only moves the epoch
    state.update(txn_batch(5, 0, 1, epoch=1))
    assert state.update(marker(5, 2, epoch=2)) is None
    assert state.ongoing_transactions == {5: 1}
    assert state.last_entry(5).producer_epoch == 2


def test_transactional_batches_follow_the_idempotence_rules():
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0, 2))
    dup = state.check(txn_batch(1, 0, 0, 2))
    assert (dup.first_offset, dup.last_offset) == (0, 1)
    state.update(marker(1, 2, epoch=1), commit=False)  # the coordinator bumped the epoch
    with pytest.raises(InvalidProducerEpochError):
        state.check(txn_batch(1, 2, 3, epoch=0))


def test_markers_of_fenced_epochs_and_coordinators_are_refused():
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0, epoch=3))
    state.update(marker(1, 1, epoch=3), commit=True, coordinator_epoch=5)
    state.check_marker(1, 3, 5)
    state.check_marker(1, 4, 6)
    state.check_marker(99, 0, 0)  # unknown producer: nothing to fence against
    with pytest.raises(InvalidProducerEpochError, match="older than its current epoch 3"):
        state.check_marker(1, 2, 5)
    with pytest.raises(ProducerFencedError, match="coordinator epoch 4"):
        state.check_marker(1, 3, 4)


def test_rebuild_gives_the_live_state_and_every_abort():
    live = ProducerStateManager()
    headers = [
        txn_batch(1, 0, 0),
        txn_batch(2, 0, 1),
        marker(1, 2),
        txn_batch(3, 0, 3, 2),
        marker(2, 5),
        txn_batch(1, 1, 6),
    ]
    commits = {2: False, 5: True}
    aborted = []
    for h in headers:
        txn = live.update(h, commit=commits.get(h.base_offset))
        if txn is not None and txn.aborted:
            aborted.append(live.aborted_entry(txn))
    rebuilt = ProducerStateManager()
    again = rebuilt.rebuild(headers, marker_of=lambda h: as_marker(h, commits[h.base_offset]))
    assert again == aborted == [AbortedTxn(1, 0, 2, 1)]
    assert rebuilt.ongoing_transactions == live.ongoing_transactions == {3: 3, 1: 6}
    assert rebuilt.last_stable_offset(7) == live.last_stable_offset(7) == 3
    assert rebuilt.has_transactions


def test_rebuild_forgets_ended_transactions_below_the_hw_as_it_goes():
    state = ProducerStateManager()
    headers = []
    for i in range(100):
        headers += [txn_batch(1, i, 2 * i), marker(1, 2 * i + 1)]
    state.rebuild(headers, marker_of=lambda h: as_marker(h, True), high_watermark=150)
    assert len(state._unreplicated) == 25  # markers at 151..199 await replication
    assert state.last_stable_offset(150) == 150
    assert state.last_stable_offset(200) == 200


def test_cheap_truncation_drops_transactions_above_it_and_flags_the_rest():
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0))
    state.update(txn_batch(2, 0, 1))
    state.update(marker(1, 2), commit=True)
    state.update(txn_batch(3, 0, 3))
    state.truncate_to(2)
    # producer 3's transaction is gone; producer 1's truncated marker cannot be undone by
    # the cheap path (its transaction would be open again), hence the exact rebuild the
    # partition does whenever has_transactions is set
    assert state.ongoing_transactions == {2: 1}
    assert state.first_unstable_offset == 1
    assert state.has_transactions


def test_snapshot_carries_open_transactions_and_coordinator_epochs(tmp_path):
    state = ProducerStateManager()
    state.update(txn_batch(1, 0, 0))
    state.update(marker(1, 1, epoch=0), commit=False, coordinator_epoch=9)
    state.update(txn_batch(2, 0, 2, 3))
    path = state.take_snapshot(tmp_path)
    loaded = ProducerStateManager()
    loaded.load_snapshot(path)
    assert loaded.ongoing_transactions == {2: 2}
    assert loaded.last_stable_offset(10) == 2
    assert loaded.last_entry(1).coordinator_epoch == 9
    assert loaded.last_entry(2).current_txn_first_offset == 2
    # the open transaction goes on: its marker after the snapshot ends it
    assert loaded.update(marker(2, 5), commit=True) == CompletedTxn(2, 2, 5, False)


def test_an_open_transaction_keeps_its_producer_from_expiring():
    state = ProducerStateManager(producer_id_expiration_ms=10)
    state.update(txn_batch(1, 0, 0))
    state.update(header(2, 0, 0, 1, 1))
    assert state.remove_expired_producers(now_ms=10_000) == [2]
    assert 1 in state.producers


# --- the .txnindex file -------------------------------------------------------------------


def test_txn_index_appends_reads_and_truncates(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TxnIndex(path, fsync=False)
    assert len(index) == 0 and not os.path.exists(path)  # created on the first abort only
    entries = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 10, 12, 13)]
    for e in entries:
        index.append(e)
    index.flush()
    assert os.path.getsize(path) == 3 * ENTRY_SIZE == 102
    assert TxnIndex(path).entries == entries
    assert index.collect(6, 11) == entries[1:]
    assert index.collect(0, 1) == entries[:1]
    index.truncate_to(9)  # the marker at 9 is gone
    assert TxnIndex(path).entries == entries[:1]
    index.truncate_to(0)
    assert not os.path.exists(path)
    index.close()


def test_txn_index_layout_is_kafkas():
    raw = encode([AbortedTxn(0x0102, 3, 4, 5)])
    assert raw == (
        b"\x00\x00"
        + (0x0102).to_bytes(8, "big")
        + (3).to_bytes(8, "big")
        + (4).to_bytes(8, "big")
        + (5).to_bytes(8, "big")
    )
    assert decode(raw + raw[:10]) == [AbortedTxn(0x0102, 3, 4, 5)]  # a torn tail is ignored
    with pytest.raises(KafkaStorageError, match="unknown version 7"):
        decode(b"\x00\x07" + raw[2:])


def test_txn_index_replace_rewrites_only_when_it_differs(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TxnIndex(path, fsync=False)
    assert index.replace([]) is False
    assert index.replace([AbortedTxn(1, 0, 1, 2)]) is True
    assert TxnIndex(path).entries == [AbortedTxn(1, 0, 1, 2)]
    assert index.replace([AbortedTxn(1, 0, 1, 2)]) is False
    assert index.replace([]) is True and not os.path.exists(path)


# --- PartitionLog: segments' .txnindex through roll, truncation, retention, reopen --------


def open_log(path, **config):
    return PartitionLog(path, LogConfig(**config), fsync=False, checkpoint_interval_ms=0)


def data(pid, seq, n=1):
    return bytearray(
        encode_batch(
            [Record(1000, b"k", b"v%d" % i) for i in range(n)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def abort(pid):
    return bytearray(encode_txn_marker(pid, 0, False, 0, 1000))


def test_aborted_transactions_are_found_across_segments_and_survive_reopen(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append(data(1, 0, 3))  # 0-2, producer 1
    log.append(data(2, 0, 2))  # 3-4, producer 2
    log.append(abort(1))  # 5
    log.append_aborted_txn(AbortedTxn(1, 0, 5, 3))
    log.roll()
    log.append(data(3, 0))  # 6
    log.append(abort(2))  # 7
    log.append_aborted_txn(AbortedTxn(2, 3, 7, 6))
    assert [len(s.txn_index) for s in log.segments] == [1, 1]
    assert log.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 7, 6)]
    # producer 2's transaction started in the first segment, its marker is in the second
    assert log.aborted_transactions(6, 8) == [AbortedTxn(2, 3, 7, 6)]
    assert log.aborted_transactions(0, 3) == [AbortedTxn(1, 0, 5, 3)]
    log.close()
    log = open_log(d)
    assert log.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 7, 6)]
    # truncation below the second marker drops its entry
    log.truncate_to(7)
    assert log.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 5, 3)]
    assert not os.path.exists(d / "00000000000000000006.txnindex")
    log.close()


def test_retention_deletes_a_segments_txnindex_with_it(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append(data(1, 0))
    log.append(abort(1))
    log.append_aborted_txn(AbortedTxn(1, 0, 1, 2))
    log.roll()
    log.append(data(2, 0))
    log.update_high_watermark(3)
    assert os.path.exists(d / "00000000000000000000.txnindex")
    log.delete_records(2)
    log.apply_retention()
    assert not os.path.exists(d / "00000000000000000000.txnindex")
    assert log.aborted_transactions(2, 3) == []
    log.close()


def test_open_rebuilds_state_and_rewrites_a_lost_or_stale_txnindex(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    log.append(data(1, 0, 2))  # 0-1
    log.append(data(2, 0))  # 2
    log.append(abort(1))  # 3: its entry never written (a crash right after the append)
    log.roll()
    log.append(data(3, 0))  # 4
    log.append(bytearray(encode_txn_marker(3, 0, True, 0, 1000)))  # 5 commit
    # a stale entry for a marker that is not in the log
    log.append_aborted_txn(AbortedTxn(9, 4, 5, 6))
    log.update_high_watermark(6)
    log.close()
    log = open_log(d)
    state, aborted = Partition.rebuild_producer_state(log)
    assert aborted == [AbortedTxn(1, 0, 3, 2)]
    assert log.replace_aborted_txns(aborted) == 2
    assert log.aborted_transactions(0, 6) == [AbortedTxn(1, 0, 3, 2)]
    assert state.ongoing_transactions == {2: 2}
    assert state.last_stable_offset(6) == 2
    assert log.replace_aborted_txns(aborted) == 0
    log.close()


def test_compaction_drops_aborted_data_and_its_txnindex_entries_with_it(tmp_path):
    from brokernodes.storage.cleaner import LogCleaner
    from tests.unit.storage.cleaner_helpers import T0, read_all
    from tests.unit.storage.cleaner_helpers import open_log as open_compacted

    log = open_compacted(tmp_path / "t-0")
    keyed = [Record(T0, b"k", b"aborted"), Record(T0, b"j", b"aborted")]
    log.append(encode_batch(keyed, producer_id=7, producer_epoch=0, is_transactional=True))
    log.append(bytearray(encode_txn_marker(7, 0, False, 0, T0)))  # 2: ABORT
    log.append_aborted_txn(AbortedTxn(7, 0, 2, 3))
    log.roll()
    log.append(encode_batch([Record(T0, b"k", b"kept")]))  # 3
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    first = tmp_path / "t-0" / "00000000000000000000.txnindex"
    assert first.exists()
    LogCleaner(now_ms=T0).clean(log, force=True)
    # the aborted records are gone from the log, so their entry has nothing left to hide
    left = read_all(log)
    assert [o for o, _, _ in left] == [2, 3]  # the ABORT marker (kept) and the record
    assert left[1][2] == b"kept"
    assert log.aborted_transactions(0, 4) == []
    assert not first.exists()
    log.close()
    reopened = open_log(tmp_path / "t-0")
    state, aborted = Partition.rebuild_producer_state(reopened)
    assert (state.ongoing_transactions, aborted) == ({}, [])
    assert reopened.aborted_transactions(0, 4) == []
    reopened.close()
