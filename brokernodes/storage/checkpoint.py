"""Kafka's text checkpoint files, e.g. ``recovery-point-offset-checkpoint``.

The format (Kafka's ``CheckpointFile``)::

    0            <- version (int)
    2            <- number of entries
    my-topic 0 42
    my-topic 1 17

One entry per line, fields separated by single spaces. A formatter turns an entry into a line
and back, so the same class serves offsets ("topic partition offset"), leader epochs
("epoch startOffset") and log start offsets. ``read()`` of a missing file is ``[]`` (a fresh
directory); anything malformed raises ``KafkaStorageError`` naming the path, the line and the
fault, because a silently misread checkpoint would mean replaying or skipping data.
``write()`` replaces the file atomically: write a ``.tmp`` sibling, fsync it, rename it over the
old file, fsync the directory, so a crash leaves either the old or the new checkpoint.

Not thread-safe by itself: callers (the partition log, the leader epoch cache) serialise
writes to one file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from brokernodes.errors import KafkaStorageError
from brokernodes.storage.files import atomic_write

T = TypeVar("T")


class CheckpointFormatter(Protocol[T]):
    """Converts one entry to one line (no newline) and back; ``from_line`` raises ValueError."""

    def to_line(self, entry: T) -> str: ...

    def from_line(self, line: str) -> T: ...


@dataclass(frozen=True, slots=True)
class TopicPartitionOffset:
    """One entry of an offset checkpoint (recovery point, log start offset)."""

    topic: str
    partition: int
    offset: int


class TopicPartitionOffsetFormatter:
    """``topic partition offset``, Kafka's format for the offset checkpoints."""

    def to_line(self, entry: TopicPartitionOffset) -> str:
        if not entry.topic or " " in entry.topic or "\n" in entry.topic:
            raise ValueError(f"topic name {entry.topic!r} cannot be written to a checkpoint")
        return f"{entry.topic} {entry.partition} {entry.offset}"

    def from_line(self, line: str) -> TopicPartitionOffset:
        topic, partition, offset = _fields(line, 3)
        return TopicPartitionOffset(topic, _int(partition, "partition"), _int(offset, "offset"))


class IntPairFormatter:
    """Two integers, e.g. ``epoch startOffset`` in ``leader-epoch-checkpoint``."""

    def to_line(self, entry: tuple[int, int]) -> str:
        return f"{int(entry[0])} {int(entry[1])}"

    def from_line(self, line: str) -> tuple[int, int]:
        a, b = _fields(line, 2)
        return _int(a, "first field"), _int(b, "second field")


class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's text checkpoint format at ``path``."""

    def __init__(
        self, path: str | os.PathLike[str], version: int, formatter: CheckpointFormatter[T]
    ):
        self.path = os.fspath(path)
        self.version = version
        self.formatter = formatter

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file's content atomically with ``entries`` (fsynced before returning)."""
        lines = [self.formatter.to_line(e) for e in entries]
        for line in lines:
            if "\n" in line:
                raise ValueError(f"checkpoint entry line contains a newline: {line!r}")
        text = "".join(f"{x}\n" for x in [str(self.version), str(len(lines)), *lines])
        atomic_write(self.path, text.encode("utf-8"))

    def read(self) -> list[T]:
        """The entries, ``[]`` if the file does not exist; ``KafkaStorageError`` if malformed."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise KafkaStorageError(f"cannot read checkpoint file {self.path}: {e}") from e
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise KafkaStorageError(f"checkpoint file {self.path} is not UTF-8 text: {e}") from e
        return self._parse(text)

    def _parse(self, text: str) -> list[T]:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the newline that ends the last line

        def fail(lineno: int, what: str) -> KafkaStorageError:
            return KafkaStorageError(
                f"malformed checkpoint file {self.path}, line {lineno}: {what}"
            )

        if not lines:
            raise fail(1, "file is empty, expected a version line")
        version = _parse_int(lines[0], lambda w: fail(1, f"version {w}"))
        if version != self.version:
            raise fail(1, f"unrecognised version {version}, expected {self.version}")
        if len(lines) < 2:
            raise fail(2, "missing entry count line")
        count = _parse_int(lines[1], lambda w: fail(2, f"entry count {w}"))
        if count < 0:
            raise fail(2, f"negative entry count {count}")
        entries: list[T] = []
        for i in range(count):
            lineno = 3 + i
            if 2 + i >= len(lines):
                raise fail(lineno, f"expected {count} entries but found only {i}")
            try:
                entries.append(self.formatter.from_line(lines[2 + i]))
            except (ValueError, TypeError) as e:
                raise fail(lineno, f"bad entry {lines[2 + i]!r}: {e}") from e
        if len(lines) > 2 + count:
            raise fail(3 + count, f"expected {count} entries but found more")
        return entries

    def __repr__(self) -> str:
        return f"CheckpointFile({self.path!r}, version={self.version})"


def _parse_int(s: str, fail) -> int:
    try:
        return _int(s, "value")
    except ValueError:
        raise fail(f"{s!r} is not an integer") from None


def _int(s: str, what: str) -> int:
    # int() accepts " 1", "+1" and "1_0"; a checkpoint holds plain decimal only.
    body = s[1:] if s.startswith("-") else s
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"{what} {s!r} is not an integer")
    return int(s)


def _fields(line: str, n: int) -> list[str]:
    parts = line.split(" ")
    if len(parts) != n or any(p == "" for p in parts):
        raise ValueError(f"expected {n} space-separated fields, found {len(parts)}")
    return parts
