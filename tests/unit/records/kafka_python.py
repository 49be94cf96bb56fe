"""kafka-python 3.0.12 as an independent RecordBatch v2 implementation to check Sluice against.

kafka-python's snappy support needs python-snappy, which is not installed; ``snappy_shim``
stands in for it with cramjam's raw snappy (the library python-snappy 0.7 itself wraps), so
kafka-python's own xerial framing code is what gets exercised.
"""

from __future__ import annotations

import types
import warnings

import cramjam

with warnings.catch_warnings():  # kafka-python's protocol schemas use deprecated importlib APIs
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kafka_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from brokernodes.records.batch import Record

snappy_shim = types.SimpleNamespace(
    compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
    decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
)


def kafka_python_build(
    records: list[Record],
    codec: int = 0,
    *,
    is_transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A batch from kafka-python's builder (base offset 0, partition leader epoch 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    delta = -1
    for record in records:
        delta = delta + 1 if record.offset_delta is None else record.offset_delta
        meta = builder.append(
            delta,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
        )
        assert meta is not None
    return bytes(builder.build())


def kafka_python_read(buf: bytes) -> tuple[DefaultRecordBatch, list]:
    """kafka-python's view of one batch: the batch (CRC checked) and its records."""
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc(), "kafka-python says the CRC is wrong"
    return batch, list(batch)


__all__ = [
    "DefaultRecordBatch",
    "kafka_codec",
    "kafka_python_build",
    "kafka_python_read",
    "snappy_shim",
]
