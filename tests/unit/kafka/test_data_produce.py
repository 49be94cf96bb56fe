"""The pure parts of the Kafka Produce handler."""

from __future__ import annotations

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.kafka.handlers.produce import has_transactional_batch, partition_error
from brokernodes.server.protocol.kafka import errors as kerr


def batch(**kw) -> bytes:
    return encode_batch([Record(1, b"k", b"v")], **kw)


def test_transactional_or_control_batches_are_found_anywhere():
    plain = batch()
    assert not has_transactional_batch(plain)
    assert not has_transactional_batch(plain * 3)
    assert has_transactional_batch(plain + batch(is_transactional=True, producer_id=1))
    assert has_transactional_batch(memoryview(batch(is_control=True) + plain))


def test_malformed_buffers_are_left_to_the_append():
    assert not has_transactional_batch(b"")
    assert not has_transactional_batch(b"\x00" * 30)
    truncated = bytearray(batch())
    truncated[8:12] = (0).to_bytes(4, "big")
    assert not has_transactional_batch(truncated + batch(is_transactional=True))


def test_partition_error_answers_no_offsets():
    e = partition_error(3, kerr.NOT_LEADER_OR_FOLLOWER, "moved")
    assert e == {
        "index": 3,
        "error_code": kerr.NOT_LEADER_OR_FOLLOWER,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "error_message": "moved",
    }
