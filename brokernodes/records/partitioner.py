"""Kafka's default partitioners, bit for bit as the Java client computes them.

Keyed records go to ``toPositive(murmur2(key)) % num_partitions``, Kafka's
``Utils.murmur2`` / ``BuiltInPartitioner.partitionForKey``, so a key lands on the same
partition from Sluice's SDK as from any Kafka client that uses the Java default (librdkafka's
``murmur2_random`` and kafka-python's ``DefaultPartitioner`` agree). Keyless records use the
sticky partitioner of KIP-480: stay on one partition until its batch is full or sent, then
move to another at random, so keyless traffic forms large batches instead of many small ones.

Pure, in ``records`` because both sides partition: the SDK's producer, and the broker for
JSON produce requests that name no partition (``brokernodes.client.partitioner`` re-exports
these names for the SDK's users).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

__all__ = [
    "StickyPartitioner",
    "murmur2",
    "partition_for_key",
    "to_positive",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF
_U32_LE = struct.Struct("<I")


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2 (32-bit) of ``data`` as a signed Java ``int``.

    Works four little-endian bytes per step and masks to 32 bits, which gives the same bits
    as Java's wrapping ``int`` arithmetic; the tail is folded in Kafka's order (byte 2, 1, 0).
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    body = length & ~3
    if body:
        for (k,) in _U32_LE.iter_unpack(data if body == length else data[:body]):
            k = (k * _M) & _MASK32
            k ^= k >> _R
            h = ((h * _M) & _MASK32) ^ ((k * _M) & _MASK32)
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[body + 2] << 16
        if tail >= 2:
            h ^= data[body + 1] << 8
        h = ((h ^ data[body]) * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which overflows)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's Java client picks for a serialized ``key``.

    Uses all ``num_partitions``, available or not, as Kafka does, so a key's partition never
    moves while a leader is down.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """KIP-480 partitioner for one topic: keyed records hash, keyless records stick.

    The producer calls ``partition`` for every record and ``on_new_batch`` when the batch for
    the sticky partition is full or has been sent (the moment Kafka's ``RecordAccumulator``
    aborts an append "for a new batch"); the next keyless record then goes to a different
    partition chosen at random. Keep one instance per topic. Not thread-safe: the SDK
    partitions on its event loop.

    ``available`` lists the partitions that have a leader now (Kafka's
    ``availablePartitionsForTopic``); None means all of them. Keyless records go only to
    available partitions, and to any partition when none is available, as in Kafka's
    ``StickyPartitionCache``.
    """

    __slots__ = ("_random", "_sticky")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._random = rng if rng is not None else random.Random()
        self._sticky: int | None = None

    @property
    def sticky_partition(self) -> int | None:
        """The partition keyless records currently go to, or None before the first one."""
        return self._sticky

    def partition(
        self,
        key: bytes | bytearray | memoryview | None,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        """Partition for one record: murmur2 for a key, the sticky partition without one."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        sticky = self._sticky
        if (
            sticky is not None
            and sticky < num_partitions
            and (not available or sticky in available)
        ):
            return sticky
        return self._next_partition(num_partitions, available, avoid=sticky)

    def on_new_batch(
        self,
        prev_partition: int,
        num_partitions: int,
        available: Sequence[int] | None = None,
    ) -> int:
        """The batch for ``prev_partition`` is full or sent: move keyless records elsewhere.

        A stale call (the sticky partition already moved away from ``prev_partition``) changes
        nothing, as in Kafka's ``StickyPartitionCache.nextPartition``. Returns the sticky
        partition now in force.
        """
        if self._sticky is None or self._sticky == prev_partition:
            return self._next_partition(num_partitions, available, avoid=prev_partition)
        return self._sticky

    def _next_partition(
        self, num_partitions: int, available: Sequence[int] | None, avoid: int | None
    ) -> int:
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        rng = self._random
        if available is None:
            if num_partitions == 1:
                chosen = 0
            elif avoid is not None and 0 <= avoid < num_partitions:
                chosen = rng.randrange(num_partitions - 1)
                chosen += chosen >= avoid  # uniform over every partition but ``avoid``
            else:
                chosen = rng.randrange(num_partitions)
        else:
            candidates = sorted({p for p in available if 0 <= p < num_partitions})
            if not candidates:
                chosen = rng.randrange(num_partitions)
            elif len(candidates) == 1:
                chosen = candidates[0]
            else:
                chosen = rng.choice([p for p in candidates if p != avoid])
        self._sticky = chosen
        return chosen
