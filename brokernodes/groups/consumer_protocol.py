"""The "consumer" protocol type's metadata and assignment bytes (Kafka's
``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``, versions 0-3).

In the classic group protocol these bytes are opaque to the coordinator: the members'
client-side assignor reads them. The broker decodes them only to show a group (subscribed
topics, assigned partitions) and encodes them to describe a KIP-848 group to DescribeGroups.
Decoding is lenient about newer versions (they append fields, as Kafka's consumer protocol
promises) and strict about truncation: bad bytes raise ``ValueError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from brokernodes.groups.types import TopicPartition

PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None
    version: int = 0


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("truncated consumer protocol bytes")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated consumer protocol bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self, nullable: bool = False) -> str | None:
        n = self.take(">h")
        if n < 0:
            if nullable:
                return None
            raise ValueError("null string in consumer protocol bytes")
        return self.raw(n).decode()

    def nbytes(self) -> bytes | None:
        n = self.take(">i")
        return None if n < 0 else self.raw(n)

    def count(self) -> int:
        n = self.take(">i")
        if n < 0:
            return 0
        if n > len(self.data) - self.pos:  # every element takes at least a byte
            raise ValueError("array count larger than the bytes left")
        return n

    def partitions(self) -> tuple[TopicPartition, ...]:
        out = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out.extend(TopicPartition(topic, self.take(">i")) for _ in range(self.count()))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.take(">h")
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.nbytes()
    owned: tuple[TopicPartition, ...] = ()
    generation, rack = -1, None
    if version >= 1:
        owned = r.partitions()
    if version >= 2:
        generation = r.take(">i")
    if version >= 3:
        rack = r.string(nullable=True)
    return Subscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment()
    r = _Reader(data)
    version = r.take(">h")
    if version < 0:
        raise ValueError(f"bad consumer protocol version {version}")
    partitions = r.partitions()
    user_data = r.nbytes() if r.pos < len(r.data) else None
    return Assignment(partitions, user_data, version)


def _str(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _partitions(tps) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    out = [struct.pack(">i", len(by_topic))]
    for t, ps in by_topic.items():
        out.append(
            _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
        )
    return b"".join(out)


def encode_subscription(topics, owned=(), *, version: int = 1, user_data=None) -> bytes:
    out = [struct.pack(">h", version), struct.pack(">i", len(topics))]
    out += [_str(t) for t in sorted(topics)]
    out.append(_bytes(user_data))
    if version >= 1:
        out.append(_partitions(owned))
    if version >= 2:
        out.append(struct.pack(">i", -1))
    if version >= 3:
        out.append(struct.pack(">h", -1))
    return b"".join(out)


def encode_assignment(partitions, *, version: int = 0, user_data=None) -> bytes:
    return struct.pack(">h", version) + _partitions(partitions) + _bytes(user_data)


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The topics in a member's subscription bytes; empty when they do not decode."""
    try:
        return frozenset(decode_subscription(metadata).topics)
    except (ValueError, UnicodeDecodeError):
        return frozenset()


def assigned_partitions(assignment: bytes) -> list[TopicPartition]:
    """The partitions in assignment bytes; empty when they do not decode."""
    try:
        return sorted(decode_assignment(assignment).partitions)
    except (ValueError, UnicodeDecodeError):
        return []
