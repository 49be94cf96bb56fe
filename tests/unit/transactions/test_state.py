"""The transaction state machine (brokernodes.transactions.state): every move a transactional
id's metadata makes, the fencing of older epochs, timeouts, and the __transaction_state
record round trip a new coordinator rebuilds from."""

from __future__ import annotations

import itertools

import pytest

from brokernodes.transactions import records
from brokernodes.transactions import state as txn
from brokernodes.transactions.state import TxnError, TxnMetadata, TxnState

TID = "acme/payments"
T0 = 1_000_000


def ids():
    counter = itertools.count(100)
    return lambda: next(counter)


def init(meta=None, *, expected=(-1, -1), timeout=60_000, now=T0, new_id=None):
    return txn.init_producer_id(
        meta,
        transactional_id=TID,
        timeout_ms=timeout,
        expected_producer_id=expected[0],
        expected_epoch=expected[1],
        new_producer_id=new_id or ids(),
        now_ms=now,
    )


def refused(code: str, fn, *args, **kw) -> TxnError:
    with pytest.raises(TxnError) as e:
        fn(*args, **kw)
    assert e.value.code == code, e.value.message
    assert e.value.message  # an actionable sentence, not just the code
    return e.value


def test_first_init_allocates_an_id_at_epoch_zero_and_reinit_bumps_the_epoch():
    first = init()
    assert (first.producer_id, first.producer_epoch, first.state) == (100, 0, TxnState.EMPTY)
    again = init(first)
    assert (again.producer_id, again.producer_epoch) == (100, 1)
    assert again.state is TxnState.EMPTY and again.partitions == frozenset()


def test_a_full_commit_cycle():
    m = init()
    m = txn.add_partitions(m, m.producer_id, 0, frozenset({("orders", 0)}), T0 + 1)
    assert m.state is TxnState.ONGOING and m.start_ms == T0 + 1
    m = txn.add_partitions(m, m.producer_id, 0, frozenset({("orders", 1)}), T0 + 2)
    assert m.partitions == {("orders", 0), ("orders", 1)} and m.start_ms == T0 + 1
    same = txn.add_partitions(m, m.producer_id, 0, frozenset({("orders", 1)}), T0 + 3)
    assert same is m  # nothing new: nothing to persist
    m = txn.end_txn(m, m.producer_id, 0, True, T0 + 4)
    assert m.state is TxnState.PREPARE_COMMIT and len(m.partitions) == 2
    assert txn.end_txn(m, m.producer_id, 0, True, T0 + 5) is m  # a retried EndTxn
    refused("INVALID_TXN_STATE", txn.end_txn, m, m.producer_id, 0, False, T0 + 5)
    refused("CONCURRENT_TRANSACTIONS", txn.add_partitions, m, m.producer_id, 0, {("o", 0)}, T0)
    done = txn.complete(m, T0 + 6)
    assert done.state is TxnState.COMPLETE_COMMIT and done.partitions == frozenset()
    assert txn.end_txn(done, done.producer_id, 0, True, T0 + 7) is done  # retry after it
    nxt = txn.add_partitions(done, done.producer_id, 0, frozenset({("orders", 2)}), T0 + 8)
    assert nxt.state is TxnState.ONGOING and nxt.partitions == {("orders", 2)}


def test_abort_cycle_and_aborting_an_empty_transaction():
    m = init()
    assert txn.end_txn(m, m.producer_id, 0, False, T0) is m  # nothing to abort
    refused("INVALID_TXN_STATE", txn.end_txn, m, m.producer_id, 0, True, T0)
    m = txn.add_partitions(m, m.producer_id, 0, frozenset({("a", 0)}), T0)
    m = txn.complete(txn.end_txn(m, m.producer_id, 0, False, T0), T0)
    assert m.state is TxnState.COMPLETE_ABORT
    refused("INVALID_TXN_STATE", txn.end_txn, m, m.producer_id, 0, True, T0)


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction():
    old = init()
    old = txn.add_partitions(old, old.producer_id, 0, frozenset({("a", 0)}), T0)
    fencing = init(old)
    # the ongoing transaction is aborted at the bumped epoch before the new instance starts
    assert fencing.state is TxnState.PREPARE_ABORT and fencing.producer_epoch == 1
    assert fencing.partitions == {("a", 0)}
    refused("CONCURRENT_TRANSACTIONS", init, fencing)
    aborted = txn.complete(fencing, T0)
    new = init(aborted, expected=(aborted.producer_id, 1))
    assert new.producer_epoch == 2 and new.state is TxnState.EMPTY
    # the zombie at epoch 0 is refused everywhere
    refused("PRODUCER_FENCED", txn.add_partitions, new, new.producer_id, 0, {("a", 1)}, T0)
    refused("PRODUCER_FENCED", txn.end_txn, new, new.producer_id, 0, True, T0)
    refused("INVALID_PRODUCER_ID_MAPPING", txn.end_txn, new, 7, 2, True, T0)
    refused("PRODUCER_FENCED", init, new, expected=(new.producer_id, 0))


def test_epoch_exhaustion_moves_to_a_new_producer_id():
    m = TxnMetadata(TID, 5, txn.MAX_EPOCH - 1, 60_000)
    bumped = init(m, new_id=lambda: 77)
    assert (bumped.producer_id, bumped.producer_epoch) == (77, 0)


def test_timeout_aborts_with_a_bumped_epoch():
    m = init(timeout=1_000)
    m = txn.add_partitions(m, m.producer_id, 0, frozenset({("a", 0)}), T0)
    assert not m.expired(T0 + 1_000) and m.expired(T0 + 1_001)
    refused("INVALID_TXN_STATE", txn.begin_abort_on_timeout, m, T0 + 10, ids())
    aborting = txn.begin_abort_on_timeout(m, T0 + 1_001, ids())
    assert aborting.state is TxnState.PREPARE_ABORT and aborting.producer_epoch == 1
    # the stuck producer's commit is refused as fenced
    refused("PRODUCER_FENCED", txn.end_txn, aborting, m.producer_id, 0, True, T0)


@pytest.mark.parametrize("timeout", [0, -1, txn.MAX_TIMEOUT_MS + 1])
def test_transaction_timeout_bounds(timeout):
    refused("INVALID_TRANSACTION_TIMEOUT", init, timeout=timeout)


def test_unknown_producer():
    refused("INVALID_PRODUCER_ID_MAPPING", txn.add_partitions, None, 1, 0, {("a", 0)}, T0)


def test_records_round_trip_and_load_keeps_the_last_value():
    m = init()
    both = frozenset({("a", 0), ("__consumer_offsets", 3)})
    m = txn.add_partitions(m, m.producer_id, 0, both, T0)
    key = records.encode_key(TID)
    assert records.decode_key(key) == TID
    assert records.decode_value(TID, records.encode_value(m)) == m
    other = init()
    loaded = records.load(
        [
            (key, records.encode_value(other)),
            (records.encode_key("b"), records.encode_value(other)),
            (key, records.encode_value(m)),
            (records.encode_key("b"), None),  # a tombstone forgets the id
        ]
    )
    assert loaded == {TID: m}


def test_corrupt_records_are_refused():
    with pytest.raises(records.CorruptTxnRecordError):
        records.decode_key(b"\x00\x07x")
    with pytest.raises(records.CorruptTxnRecordError):
        records.decode_value(TID, b'{"v": 9}')
    with pytest.raises(records.CorruptTxnRecordError):
        records.decode_value(TID, b"not json")


def test_idle_ids_expire_only_with_nothing_in_flight():
    m = init(now=T0)
    assert not m.idle(T0 + 1_000, 1_000) and m.idle(T0 + 1_001, 1_000)
    ongoing = txn.add_partitions(m, m.producer_id, 0, frozenset({("a", 0)}), T0)
    assert not ongoing.idle(T0 + 10**9, 1_000)  # the timeout aborts it first
    preparing = txn.end_txn(ongoing, m.producer_id, 0, True, T0)
    assert not preparing.idle(T0 + 10**9, 1_000)
    assert txn.complete(preparing, T0).idle(T0 + 1_001, 1_000)
