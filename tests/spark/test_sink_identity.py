"""The sink's pure no-duplicate core: producer ids, resume points, deterministic routing."""

from __future__ import annotations

import pytest

from spark.datasource.sink_identity import (
    CLIENT_CHOSEN_MIN,
    KeylessPartitioner,
    PartitionProgress,
    SinkError,
    content,
    key_partition,
    producer_id_for,
    resume_point,
)


def test_producer_ids_are_stable_distinct_and_in_the_client_range():
    ids = {producer_id_for("w1", b, p) for b in range(20) for p in range(50)}
    assert len(ids) == 1000
    assert all(CLIENT_CHOSEN_MIN <= i < 2 * CLIENT_CHOSEN_MIN for i in ids)
    assert producer_id_for("w1", 3, 7) == producer_id_for("w1", 3, 7)
    assert producer_id_for("w1", 3, 7) != producer_id_for("w2", 3, 7)


def answer(**kw):
    return {
        "producer_id": 5,
        "producer_epoch": 0,
        "last_sequence": 41,
        "last_offset": 90,
        "high_watermark": 91,
        **kw,
    }


def test_resume_point():
    assert resume_point(answer(), 5) == 42
    assert resume_point(answer(last_sequence=-1, producer_epoch=-1), 5) == 0
    # the last batch is not on every in-sync replica yet: ask again
    assert resume_point(answer(high_watermark=90), 5) is None
    with pytest.raises(SinkError, match="INVALID_PRODUCER_EPOCH"):
        resume_point(answer(producer_epoch=3), 5)
    with pytest.raises(SinkError, match="not 6"):
        resume_point(answer(), 6)


def test_progress_skips_what_was_written():
    progress = PartitionProgress(already_written=2)
    assert [progress.admit() for _ in range(4)] == [False, False, True, True]


def test_keyless_routing_depends_only_on_the_input():
    def route(seed):
        k = KeylessPartitioner(seed, sticky_bytes=100)
        return [k.partition("t", 3, 30) for _ in range(12)]

    first = route(7)
    assert first == route(7)  # a retried attempt routes the same way
    assert first[:4] == [1, 1, 1, 1] and first[4:8] == [2, 2, 2, 2] and first[8:] == [0] * 4


def test_key_partition_is_kafkas():
    # Kafka's murmur2 test vector: "21" -> -973932308; toPositive % 3
    assert key_partition(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3


def _skip_all(progress, rows):
    for row in rows:
        assert not progress.admit()
        if progress.verifying():
            progress.observe(content(*row), "t-0")


def test_the_last_batch_read_back_must_match_the_skipped_rows():
    rows = [(f"k{i}", f"v{i}", [("h", b"x")]) for i in range(5)]
    last = [content(*r) for r in rows[3:]]
    _skip_all(PartitionProgress(5, last), rows)  # the same rows: fine
    with pytest.raises(SinkError, match=r"INPUT_CHANGED.*positions 4\.\.5"):
        _skip_all(PartitionProgress(5, last), [*rows[:3], rows[4], rows[3]])
    short = PartitionProgress(5, last)
    _skip_all(short, rows[:2])
    with pytest.raises(SinkError, match="appended 5 records here, this one has only 2"):
        short.finish("t-0")


def test_the_brokers_never_allocate_the_sinks_range(tmp_path):
    from brokernodes.server.producer_ids import COUNTER_BITS, ProducerIdManager

    top = ProducerIdManager(tmp_path, (CLIENT_CHOSEN_MIN >> COUNTER_BITS) - 1)
    assert top.next_id() < CLIENT_CHOSEN_MIN
    with pytest.raises(ValueError, match="does not fit a producer id"):
        ProducerIdManager(tmp_path, CLIENT_CHOSEN_MIN >> COUNTER_BITS)
