"""CheckpointFile: Kafka's text checkpoint format, atomic replace, clear errors."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokernodes.errors import KafkaStorageError
from brokernodes.storage.checkpoint import (
    CheckpointFile,
    IntPairFormatter,
    TopicPartitionOffset,
    TopicPartitionOffsetFormatter,
)


def offsets_file(tmp_path, version=0):
    return CheckpointFile(
        tmp_path / "recovery-point-offset-checkpoint", version, TopicPartitionOffsetFormatter()
    )


def test_missing_file_reads_empty(tmp_path):
    assert offsets_file(tmp_path).read() == []


def test_write_then_read_roundtrip_and_exact_bytes(tmp_path):
    cp = offsets_file(tmp_path)
    entries = [TopicPartitionOffset("orders", 0, 42), TopicPartitionOffset("orders", 1, 17)]
    cp.write(entries)
    assert cp.read() == entries
    assert (tmp_path / "recovery-point-offset-checkpoint").read_bytes() == (
        b"0\n2\norders 0 42\norders 1 17\n"
    )
    assert not os.path.exists(cp.path + ".tmp")


def test_write_empty_list(tmp_path):
    cp = offsets_file(tmp_path)
    cp.write([])
    assert (tmp_path / "recovery-point-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert cp.read() == []


def test_write_replaces_previous_content(tmp_path):
    cp = CheckpointFile(tmp_path / "leader-epoch-checkpoint", 0, IntPairFormatter())
    cp.write([(0, 0), (1, 10), (2, 20)])
    cp.write([(5, 100)])
    assert cp.read() == [(5, 100)]


def test_reads_kafka_written_file_without_trailing_newline(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 120")
    cp = CheckpointFile(tmp_path / "leader-epoch-checkpoint", 0, IntPairFormatter())
    assert cp.read() == [(0, 0), (3, 120)]


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        ("", 1, "empty"),
        ("x\n0\n", 1, "not an integer"),
        ("1\n0\n", 1, "unrecognised version 1"),
        ("0\n", 2, "missing entry count"),
        ("0\nabc\n", 2, "not an integer"),
        ("0\n-1\n", 2, "negative"),
        ("0\n2\n0 0\n", 4, "found only 1"),
        ("0\n1\n0 0\n1 5\n", 4, "found more"),
        ("0\n1\n0\n", 3, "expected 2 space-separated fields"),
        ("0\n1\n0 x\n", 3, "not an integer"),
        ("0\n1\n0  1\n", 3, "bad entry"),
        ("0\n1\n 0 1\n", 3, "bad entry"),
    ],
)
def test_malformed_file_names_path_line_and_fault(tmp_path, content, line, fragment):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(content)
    cp = CheckpointFile(path, 0, IntPairFormatter())
    with pytest.raises(KafkaStorageError) as err:
        cp.read()
    msg = str(err.value)
    assert str(path) in msg
    assert f"line {line}" in msg
    assert fragment in msg


def test_non_utf8_is_a_storage_error(tmp_path):
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 1\n")
    with pytest.raises(KafkaStorageError, match="UTF-8"):
        CheckpointFile(path, 0, IntPairFormatter()).read()


def test_stale_tmp_file_is_ignored_and_overwritten(tmp_path):
    cp = CheckpointFile(tmp_path / "cp", 0, IntPairFormatter())
    cp.write([(1, 2)])
    (tmp_path / "cp.tmp").write_text("garbage from a crash")
    assert cp.read() == [(1, 2)]
    cp.write([(3, 4)])
    assert cp.read() == [(3, 4)]
    assert not (tmp_path / "cp.tmp").exists()


def test_topic_with_space_is_refused(tmp_path):
    with pytest.raises(ValueError):
        offsets_file(tmp_path).write([TopicPartitionOffset("a b", 0, 1)])


def test_write_into_missing_directory_is_a_storage_error(tmp_path):
    cp = CheckpointFile(tmp_path / "nope" / "cp", 0, IntPairFormatter())
    with pytest.raises(KafkaStorageError, match="nope"):
        cp.write([(0, 0)])


topics = st.text(
    alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters="._-"),
    min_size=1,
    max_size=20,
)


@given(
    st.lists(
        st.builds(
            TopicPartitionOffset,
            topics,
            st.integers(0, 10_000),
            st.integers(-1, 2**63 - 1),
        ),
        max_size=20,
    )
)
def test_roundtrip_property(tmp_path_factory, entries):
    cp = offsets_file(tmp_path_factory.mktemp("cp"))
    cp.write(entries)
    assert cp.read() == entries
