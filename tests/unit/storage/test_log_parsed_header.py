"""``PartitionLog.append(header=...)``: the leader's produce hands over the header it parsed
(every check but the CRC made); the log then only computes the CRC, and a header that does
not fit the bytes sends the request down the full validation as before."""

from __future__ import annotations

import pytest

from brokernodes.errors import CorruptRecordError, MessageTooLargeError
from brokernodes.records.header import ATTRIBUTES_AT, iter_batches
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from tests.unit.storage.batches import make_batch


def parsed(buf: bytes | bytearray):
    (header,) = iter_batches(buf, verify_crc=False)
    return header


def test_an_append_with_the_parsed_header_is_the_same_append(tmp_path):
    plain = PartitionLog(str(tmp_path / "a-0"), LogConfig(), fsync=False)
    given = PartitionLog(str(tmp_path / "b-0"), LogConfig(), fsync=False)
    for i in range(4):
        buf = make_batch(3 + i, timestamp=1_000 + i)
        a = plain.append(bytearray(buf), leader_epoch=2, now_ms=5_000)
        b = given.append(bytearray(buf), leader_epoch=2, now_ms=5_000, header=parsed(buf))
        assert a == b
    assert plain.read(0, 1 << 20).read_bytes() == given.read(0, 1 << 20).read_bytes()
    plain.close()
    given.close()


def test_a_bad_crc_is_still_refused_and_nothing_is_written(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), fsync=False)
    buf = bytearray(make_batch(3))
    header = parsed(buf)
    buf[ATTRIBUTES_AT + 10] ^= 0xFF  # a record byte: the CRC no longer matches
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(buf, leader_epoch=0, header=header)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_a_header_that_does_not_fit_the_bytes_is_ignored(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), fsync=False)
    other = parsed(make_batch(7))  # another batch's header: another size
    info = log.append(bytearray(make_batch(3)), leader_epoch=0, header=other)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    log.close()


def test_max_message_bytes_still_applies(tmp_path):
    buf = make_batch(20)
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(max_message_bytes=len(buf) - 1))
    with pytest.raises(MessageTooLargeError):
        log.append(bytearray(buf), leader_epoch=0, header=parsed(buf))
    assert log.log_end_offset == 0
    log.close()
