"""The SDK's partitioners, kept importable here: they live in ``brokernodes.records.partitioner``
so that the broker (which partitions keyless JSON produce requests) shares them without
importing the SDK."""

from brokernodes.records.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

__all__ = [
    "StickyPartitioner",
    "murmur2",
    "partition_for_key",
    "to_positive",
]
