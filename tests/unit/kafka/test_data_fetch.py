"""The pure parts of the Kafka Fetch and ListOffsets handlers."""

from __future__ import annotations

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.kafka.context import FileRecords
from brokernodes.server.kafka.handlers.fetch import PartitionRead, epoch_error, partition_answer
from brokernodes.server.kafka.handlers.offsets import MAX_TIMESTAMP, record_in_batch
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.storage.log import FetchData


def test_leader_epoch_fencing():
    assert epoch_error(-1, 5) == kerr.NONE  # not checked
    assert epoch_error(5, 5) == kerr.NONE
    assert epoch_error(4, 5) == kerr.FENCED_LEADER_EPOCH
    assert epoch_error(6, 5) == kerr.UNKNOWN_LEADER_EPOCH


def test_partition_answer_with_records():
    r = PartitionRead("t", 2, 10, 1000)
    r.data = FetchData([], 10, high_watermark=42, log_start_offset=3, log_end_offset=50)
    files = FileRecords([], 0)
    r.files.append(files)
    a = partition_answer(r, read_committed=False)
    assert a["error_code"] == kerr.NONE and a["partition_index"] == 2
    assert (a["high_watermark"], a["last_stable_offset"], a["log_start_offset"]) == (42, 42, 3)
    assert a["records"] is files and a["aborted_transactions"] is None
    assert partition_answer(r, read_committed=True)["aborted_transactions"] == []


def test_partition_answer_with_an_error_names_the_bounds():
    r = PartitionRead("t", 0, 99, 1000, error=kerr.OFFSET_OUT_OF_RANGE, bounds=(42, 3))
    a = partition_answer(r, read_committed=False)
    assert (a["error_code"], a["high_watermark"], a["log_start_offset"]) == (
        kerr.OFFSET_OUT_OF_RANGE,
        42,
        3,
    )
    assert a["records"] == b""
    r = PartitionRead("t", 0, 0, 1000, error=kerr.TOPIC_AUTHORIZATION_FAILED)
    assert partition_answer(r, read_committed=False)["high_watermark"] == -1


def batch(timestamps, base_offset=100) -> bytes:
    return encode_batch(
        [Record(ts, None, b"v%d" % i) for i, ts in enumerate(timestamps)], base_offset=base_offset
    )


def test_timestamp_lookup_narrows_the_batch_to_the_record():
    raw = batch([1000, 1005, 1003, 1010])
    assert record_in_batch(raw, 100, 1000) == (100, 1000)
    assert record_in_batch(raw, 100, 1004) == (101, 1005)
    assert record_in_batch(raw, 100, 1010) == (103, 1010)
    assert record_in_batch(raw, 100, 1011) is None
    assert record_in_batch(raw, 102, 1000) == (102, 1003)  # not before the log start
    assert record_in_batch(raw, 100, MAX_TIMESTAMP) == (103, 1010)
    assert record_in_batch(batch([7, 9, 9]), 100, MAX_TIMESTAMP) == (101, 9)
    assert record_in_batch(b"\x00" * 70, 0, 5) is None
