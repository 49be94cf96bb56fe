"""ProducerStateManager: duplicates, sequence gaps, fencing, wrap-around, rebuild, snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
)
from brokernodes.records.header import CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from brokernodes.storage.producer_state import (
    MAX_SEQUENCE,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
    list_snapshot_offsets,
    snapshot_file,
)


def header(pid, epoch, seq, count=1, base_offset=0, timestamp=1_000, attributes=0):
    """A v2 batch header as the broker sees it; only the fields producer state reads matter."""
    return BatchHeader(
        position=0,
        base_offset=base_offset,
        batch_length=HEADER_SIZE - LOG_OVERHEAD,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


class Log:
    """A leader's append path over a ProducerStateManager, keeping every header it wrote."""

    def __init__(self):
        self.state = ProducerStateManager()
        self.headers: list[BatchHeader] = []
        self.end_offset = 0

    def produce(self, pid, epoch, seq, count=1, timestamp=1_000):
        """Returns ("appended" | "duplicate", first offset, last offset)."""
        incoming = header(pid, epoch, seq, count, timestamp=timestamp)
        duplicate = self.state.check(incoming)
        if duplicate is not None:
            return "duplicate", duplicate.first_offset, duplicate.last_offset
        written = header(pid, epoch, seq, count, self.end_offset, timestamp)
        self.headers.append(written)
        self.state.update(written)
        self.end_offset = written.next_offset
        return "appended", written.base_offset, written.last_offset


# --- sequence arithmetic -----------------------------------------------------------------


def test_sequence_wraps_like_kafka():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert decrement_sequence(1, 3) == MAX_SEQUENCE - 1
    assert decrement_sequence(8, 3) == 5


@given(st.integers(0, MAX_SEQUENCE), st.integers(0, 100_000))
def test_decrement_inverts_increment(seq, delta):
    assert decrement_sequence(increment_sequence(seq, delta), delta) == seq


# --- duplicates --------------------------------------------------------------------------


def test_duplicates_of_each_of_last_five_return_original_offsets():
    log = Log()
    written = [log.produce(7, 0, seq * 3, count=3) for seq in range(8)]
    assert written[-1] == ("appended", 21, 23)
    for seq in range(3, 8):  # the last five batches
        assert log.produce(7, 0, seq * 3, count=3) == ("duplicate", *written[seq][1:])
    assert log.end_offset == 24  # nothing appended twice


def test_sixth_oldest_retry_is_out_of_order_as_in_current_kafka():
    log = Log()
    assert NUM_BATCHES_TO_RETAIN == 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
    for seq in range(6):
        log.produce(7, 0, seq)
    with pytest.raises(OutOfOrderSequenceError) as info:
        log.produce(7, 0, 0)
    assert info.value.error_code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert log.produce(7, 0, 1) == ("duplicate", 1, 1)  # 5th oldest still known


def test_duplicate_needs_exact_sequence_range_and_epoch():
    log = Log()
    log.produce(7, 0, 0, count=4)
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(7, 0, 0, count=2)  # same base, different range: not a duplicate
    log.produce(7, 1, 0, count=4)  # new epoch starts over at 0 and is appended
    assert log.end_offset == 8


def test_each_batch_of_a_retried_request_gets_its_own_outcome():
    """[b1] then [b1, b2] (a new leader held only b1): b1 answers from the producer state,
    b2 is new; the old code answered the whole request as b1's duplicate and b2 was lost."""
    log = Log()
    log.produce(7, 0, 0)
    assert log.state.analyze_batches([header(7, 0, 0), header(7, 0, 1, 2)]) == [
        BatchMetadata(0, 0, 0, 0, 1_000),
        None,
    ]
    # a producer's batch found in the log after its new batch goes back in sequence
    with pytest.raises(OutOfOrderSequenceError, match="follows a new batch"):
        log.state.analyze_batches([header(7, 0, 1), header(7, 0, 0)])
    # a new batch after a duplicate still has to follow the producer's last sequence
    with pytest.raises(OutOfOrderSequenceError):
        log.state.analyze_batches([header(7, 0, 0), header(7, 0, 5)])
    # other producers are judged on their own
    assert log.state.analyze_batches([header(9, 0, 0), header(7, 0, 0)]) == [
        None,
        BatchMetadata(0, 0, 0, 0, 1_000),
    ]


def test_multi_batch_request_checks_each_batch_against_the_ones_before():
    log = Log()
    log.produce(7, 0, 0)
    assert log.state.check_batches([header(7, 0, 1, 2), header(7, 0, 3), header(9, 0, 0)]) is None
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check_batches([header(7, 0, 1, 2), header(7, 0, 4)])


# --- gaps, epochs ------------------------------------------------------------------------


def test_sequence_gap_is_refused_and_changes_nothing():
    log = Log()
    log.produce(7, 0, 0, count=2)
    with pytest.raises(OutOfOrderSequenceError, match="expected 2"):
        log.produce(7, 0, 3)
    assert log.produce(7, 0, 2) == ("appended", 2, 2)


def test_older_epoch_is_fenced():
    log = Log()
    log.produce(7, 3, 0)
    with pytest.raises(InvalidProducerEpochError) as info:
        log.produce(7, 2, 1)
    assert info.value.error_code == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(InvalidProducerEpochError):
        log.produce(7, 2, 0)  # even a would-be duplicate from the old epoch


def test_epoch_bump_must_start_at_zero_and_resets_state():
    log = Log()
    for seq in range(3):
        log.produce(7, 0, seq)
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        log.produce(7, 1, 3)
    log.produce(7, 1, 0)
    entry = log.state.last_entry(7)
    assert entry.producer_epoch == 1
    assert [b.first_seq for b in entry.batches] == [0]
    with pytest.raises(OutOfOrderSequenceError):
        log.produce(7, 1, 1 + 1)
    # the old epoch's batches are no longer duplicates: their epoch is fenced
    with pytest.raises(InvalidProducerEpochError):
        log.produce(7, 0, 2)


def test_unknown_producer_accepted_at_any_sequence_kip_360():
    log = Log()
    assert log.produce(7, 4, 12_345)[0] == "appended"
    assert log.produce(7, 4, 12_346)[0] == "appended"


def test_sequence_wraps_around_max_int():
    log = Log()
    log.produce(7, 0, MAX_SEQUENCE - 1, count=2)  # last sequence MAX
    assert log.produce(7, 0, 0, count=3) == ("appended", 2, 4)
    log.produce(7, 0, 3)
    # a batch straddling the wrap: base MAX, last 1
    other = Log()
    other.produce(8, 0, MAX_SEQUENCE - 3, count=3)
    assert other.produce(8, 0, MAX_SEQUENCE, count=3) == ("appended", 3, 5)
    assert other.state.last_entry(8).last_seq == 1
    assert other.produce(8, 0, MAX_SEQUENCE, count=3) == ("duplicate", 3, 5)
    assert other.produce(8, 0, 2)[0] == "appended"
    with pytest.raises(OutOfOrderSequenceError):
        other.produce(8, 0, MAX_SEQUENCE - 1)


def test_non_idempotent_batches_are_not_tracked():
    log = Log()
    for _ in range(3):
        assert log.produce(-1, -1, -1)[0] == "appended"
    assert len(log.state) == 0
    assert log.state.map_end_offset == 3


def test_idempotent_batch_without_sequence_is_invalid():
    with pytest.raises(InvalidRecordError):
        ProducerStateManager().check(header(7, 0, -1))
    with pytest.raises(InvalidRecordError):
        ProducerStateManager().check(header(7, -1, 0))


def test_control_batch_only_moves_epoch():
    state = ProducerStateManager()
    state.update(header(7, 0, 0, base_offset=0))
    state.update(header(7, 1, -1, base_offset=1, attributes=CONTROL_BIT), commit=True)
    entry = state.last_entry(7)
    assert (entry.producer_epoch, len(entry.batches), entry.last_offset) == (1, 0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(7, 1, 5))
    assert state.check(header(7, 1, 0)) is None


# --- rebuild, truncation, log start ------------------------------------------------------


def interleaved_log():
    log = Log()
    seqs = {1: 0, 2: 0, 3: 100}
    for step in range(40):
        pid = 1 + step % 3
        count = 1 + step % 4
        log.produce(pid, step // 20, seqs[pid], count, timestamp=step)
        seqs[pid] = increment_sequence(seqs[pid], count)
        if step == 19:
            seqs = {1: 0, 2: 0, 3: 0}  # everyone bumps the epoch
    return log


def test_rebuild_from_headers_equals_live_state():
    log = interleaved_log()
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(iter(log.headers))
    assert dict(rebuilt.producers) == dict(log.state.producers)
    assert rebuilt.map_end_offset == log.state.map_end_offset == log.end_offset


def test_log_start_advance_equals_rebuild_from_new_start():
    log = interleaved_log()
    for start in (0, 10, log.headers[25].base_offset + 1, log.end_offset):
        log.state.on_log_start_advanced(start)
        rebuilt = ProducerStateManager()
        rebuilt.rebuild(log.headers, log_start_offset=start)
        assert dict(rebuilt.producers) == dict(log.state.producers)


def test_log_start_past_a_producer_forgets_it():
    log = Log()
    log.produce(1, 0, 0)
    log.produce(2, 0, 0)
    log.state.on_log_start_advanced(1)
    assert set(log.state.producers) == {2}
    assert log.produce(1, 0, 1)[0] == "appended"  # unknown again: accepted (KIP-360)


def test_truncate_to_drops_batches_at_and_beyond_offset():
    log = Log()
    for seq in range(4):
        log.produce(1, 0, seq)  # offsets 0..3
    log.produce(2, 0, 0)  # offset 4
    log.state.truncate_to(2)
    assert [b.last_offset for b in log.state.last_entry(1).batches] == [0, 1]
    assert log.state.last_entry(2) is None
    assert log.state.map_end_offset == 2
    # the producer retries what was truncated and continues in sequence
    log.end_offset = 2
    assert log.produce(1, 0, 2) == ("appended", 2, 2)
    assert log.produce(1, 0, 1) == ("duplicate", 1, 1)


def test_truncate_keeps_a_subset_of_what_rebuild_finds():
    log = interleaved_log()
    cut = log.headers[30].base_offset
    log.state.truncate_to(cut)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(h for h in log.headers if h.base_offset < cut)
    assert rebuilt.map_end_offset == log.state.map_end_offset == cut
    for pid, entry in log.state.producers.items():
        full = rebuilt.last_entry(pid)
        assert entry.producer_epoch == full.producer_epoch
        assert list(entry.batches) == list(full.batches)[-len(entry.batches) :]


def test_expired_producers_are_removed():
    state = ProducerStateManager(producer_id_expiration_ms=1_000)
    state.update(header(1, 0, 0, base_offset=0, timestamp=100))
    state.update(header(2, 0, 0, base_offset=1, timestamp=900))
    assert state.remove_expired_producers(1_100) == [1]
    assert set(state.producers) == {2}


# --- snapshots ---------------------------------------------------------------------------


def test_snapshot_roundtrip_then_replay_matches_live(tmp_path):
    log = interleaved_log()
    middle = log.headers[20].base_offset
    partial = ProducerStateManager()
    partial.rebuild(h for h in log.headers if h.base_offset < middle)
    path = partial.take_snapshot(tmp_path)
    assert path == snapshot_file(tmp_path, middle)
    assert path.name == f"{middle:020d}.snapshot"
    assert list_snapshot_offsets(tmp_path) == [middle]

    loaded = ProducerStateManager()
    loaded.load_snapshot(path)
    assert loaded.map_end_offset == middle
    for pid, entry in partial.producers.items():
        got = loaded.last_entry(pid)
        assert (got.producer_epoch, got.last_timestamp) == (
            entry.producer_epoch,
            entry.last_timestamp,
        )
        assert list(got.batches) == [entry.batches[-1]]  # Kafka keeps only the last batch
    loaded.replay(log.headers)
    assert loaded.map_end_offset == log.end_offset
    for pid, entry in log.state.producers.items():
        got = loaded.last_entry(pid)
        assert got.producer_epoch == entry.producer_epoch
        assert got.batches[-1] == entry.batches[-1]


def test_corrupt_snapshot_is_refused(tmp_path):
    state = ProducerStateManager()
    state.update(header(1, 0, 0))
    path = state.take_snapshot(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        ProducerStateManager().load_snapshot(path)
    path.write_bytes(data[:4])
    with pytest.raises(CorruptSnapshotError, match="truncated"):
        ProducerStateManager().load_snapshot(path)


def test_snapshot_bytes_follow_kafka_v1_layout(tmp_path):
    state = ProducerStateManager()
    state.update(header(0x0102030405060708, 9, 10, count=3, base_offset=40, timestamp=77))
    data = state.take_snapshot(tmp_path).read_bytes()
    assert data[:2] == b"\x00\x01" and data[6:10] == b"\x00\x00\x00\x01"
    assert data[10:] == (
        bytes.fromhex("0102030405060708")  # producer id
        + (9).to_bytes(2, "big")  # epoch
        + (12).to_bytes(4, "big")  # last sequence
        + (42).to_bytes(8, "big")  # last offset
        + (2).to_bytes(4, "big")  # offset delta
        + (77).to_bytes(8, "big")  # timestamp
        + b"\xff" * 4  # coordinator epoch -1
        + b"\xff" * 8  # current txn first offset -1
    )


# --- real batches ------------------------------------------------------------------------


def test_works_on_headers_of_encoded_batches():
    from brokernodes.records import batch
    from brokernodes.records.header import iter_batches, set_base_offset

    records = [(1_000 + i, b"k", b"v") for i in range(3)]
    buf = bytearray(
        batch.encode_batch(records, producer_id=42, producer_epoch=1, base_sequence=0)
        + batch.encode_batch(records, producer_id=42, producer_epoch=1, base_sequence=3)
    )
    state = ProducerStateManager()
    offset = 100
    for h in list(iter_batches(buf)):
        assert state.check(h) is None
        set_base_offset(buf, h.position, offset)
        offset += h.last_offset_delta + 1
    for h in iter_batches(buf):
        state.update(h)
    assert state.check(next(iter_batches(buf))) == BatchMetadata(0, 2, 100, 102, 1_002)
    assert state.last_entry(42).last_seq == 5


# --- model-based ------------------------------------------------------------------------


@dataclass
class ModelProducer:
    epoch: int
    batches: list = field(default_factory=list)  # every (first_seq, last_seq, first, last)


def model_produce(model, pid, epoch, first_seq, count, end_offset):
    """Kafka's rules written out plainly, keeping the whole history."""
    last_seq = (first_seq + count - 1) % 2**31
    producer = model.get(pid)
    if producer is not None:
        if epoch == producer.epoch:
            for b in producer.batches[-5:]:
                if b[:2] == (first_seq, last_seq):
                    return ("duplicate", b[2], b[3])
        if epoch < producer.epoch:
            return ("error", InvalidProducerEpochError)
        if epoch > producer.epoch and first_seq != 0:
            return ("error", OutOfOrderSequenceError)
        if epoch == producer.epoch and first_seq != (producer.batches[-1][1] + 1) % 2**31:
            return ("error", OutOfOrderSequenceError)
    if producer is None or epoch != producer.epoch:
        producer = model[pid] = ModelProducer(epoch)
    producer.batches.append((first_seq, last_seq, end_offset, end_offset + count - 1))
    return ("appended", end_offset, end_offset + count - 1)


actions = st.lists(
    st.tuples(
        st.sampled_from(["send"] * 5 + ["retry"] * 3 + ["gap", "bump", "stale", "badbump"]),
        st.integers(0, 1),  # which producer
        st.integers(1, 7),  # records (capped at 4), gap size, or how many batches back to retry
    ),
    min_size=15,
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(actions, st.sampled_from([0, MAX_SEQUENCE - 6]))
def test_matches_model_for_random_interleavings(steps, start_seq):
    log = Log()
    model = {}
    clients = {pid: {"epoch": 0, "next": start_seq, "sent": []} for pid in range(2)}
    for action, pid, n in steps:
        client = clients[pid]
        epoch, seq, count = client["epoch"], client["next"], min(n, 4)
        if action == "retry":
            if not client["sent"]:
                continue
            epoch, seq, count = client["sent"][-min(n, len(client["sent"]))]
        elif action == "gap":
            seq = increment_sequence(seq, n)
        elif action == "bump":
            client.update(epoch=epoch + 1, next=0)
            epoch, seq = epoch + 1, 0
        elif action == "badbump":  # a new epoch not starting at sequence 0
            epoch, seq = epoch + 1, seq or 1
        elif action == "stale":
            epoch = max(epoch - 1, 0)
        expected = model_produce(model, pid, epoch, seq, count, log.end_offset)
        if expected[0] == "error":
            with pytest.raises(expected[1]):
                log.produce(pid, epoch, seq, count)
            continue
        assert log.produce(pid, epoch, seq, count) == expected
        if action in ("send", "bump") and expected[0] == "appended":
            client["sent"].append((epoch, seq, count))
            client["next"] = increment_sequence(seq, count)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(log.headers)
    assert dict(rebuilt.producers) == dict(log.state.producers)
    for pid, producer in model.items():
        entry = log.state.last_entry(pid)
        assert entry.producer_epoch == producer.epoch
        assert [
            (b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches
        ] == producer.batches[-5:]


def test_update_takes_the_assigned_base_offset():
    state = ProducerStateManager()
    state.update(header(7, 0, 0, count=2, base_offset=0), base_offset=50)
    assert state.last_entry(7).batches[-1] == BatchMetadata(0, 1, 50, 51, 1_000)
    assert state.map_end_offset == 52
    assert state.check(header(7, 0, 0, count=2)) == BatchMetadata(0, 1, 50, 51, 1_000)
