"""LogConfig defaults and parsing; file helpers; concurrent use of a PartitionLog."""

from __future__ import annotations

import os
import threading

import pytest

from brokernodes.records.header import read_header
from brokernodes.storage.config import LogConfig
from brokernodes.storage.files import FileSlice, atomic_write, segment_name
from brokernodes.storage.log import PartitionLog
from tests.unit.storage.batches import make_batch, split_batches


def test_kafka_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10 << 20
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.delete_enabled and not c.compact_enabled


def test_from_properties():
    c = LogConfig.from_properties(
        {"segment.bytes": "1000", "cleanup.policy": "delete,compact", "retention.ms": -1}
    )
    assert c.segment_bytes == 1000
    assert c.cleanup_policy == "compact,delete"
    assert c.delete_enabled and c.compact_enabled
    with pytest.raises(ValueError, match="unknown log config"):
        LogConfig.from_properties({"segment.byte": 1})
    with pytest.raises(ValueError, match=r"cleanup\.policy"):
        LogConfig(cleanup_policy="forever")
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=0)


def test_atomic_write_and_names(tmp_path):
    path = tmp_path / "f"
    atomic_write(path, b"one")
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["f"]
    assert segment_name(42, ".log") == "00000000000000000042.log"
    (tmp_path / "g").write_bytes(b"0123456789")
    assert FileSlice(str(tmp_path / "g"), 3, 4).read_bytes() == b"3456"


def test_concurrent_appends_and_reads(tmp_path):
    log = PartitionLog(
        tmp_path / "t-0", LogConfig(segment_bytes=2_000, index_interval_bytes=100), fsync=False
    )
    errors = []
    done = threading.Event()

    def writer():
        try:
            for i in range(300):
                log.append(make_batch(2, timestamp=i))
                log.update_high_watermark(log.log_end_offset)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.set()

    def reader():
        try:
            while not done.is_set():
                hw = log.high_watermark
                data = log.read(0, 1 << 20, max_offset=hw).read_bytes()
                offsets = [read_header(b).base_offset for b in split_batches(data)]
                assert offsets == list(range(0, len(offsets) * 2, 2))
                assert len(offsets) * 2 <= hw
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert log.log_end_offset == 600
    log.close()
