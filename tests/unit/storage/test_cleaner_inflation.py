"""The cleaner inflates batches up to what produce allowed for the topic (the inflation cap
times its max.message.bytes), not only up to the default cap of a 1 MiB topic."""

from __future__ import annotations

from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import DEFAULT_MAX_INFLATED_BYTES, Compression
from brokernodes.storage.cleaner import LogCleaner

from .cleaner_helpers import T0, open_log, read_all


def test_a_big_topic_batch_past_the_default_cap_is_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", max_message_bytes=4 * 1024 * 1024, segment_bytes=16384)
    big = bytes(DEFAULT_MAX_INFLATED_BYTES + 1024)  # inflates past the default cap
    for value in (big, b"small"):
        log.append(encode_batch([Record(T0, b"k", value)], compression=Compression.ZSTD))
        log.append(encode_batch([Record(T0, b"other", b"x")]))
    log.roll()
    log.append(encode_batch([Record(T0, b"tail", b"t")]))
    log.update_high_watermark(log.log_end_offset)
    stats = LogCleaner(now_ms=T0).clean(log)
    assert stats.cleaned, stats.reason
    assert [(k, v) for _, k, v in read_all(log)] == [
        (b"k", b"small"),
        (b"other", b"x"),
        (b"tail", b"t"),
    ]
    log.close()
