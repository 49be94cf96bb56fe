"""Small value types shared by the group modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic-partition; sorts by topic, then partition."""

    topic: str
    partition: int


Assignment = Mapping[str, frozenset[TopicPartition]]
"""member id -> the partitions it is (to be) assigned."""


class MemberSubscription(NamedTuple):
    """What an assignor needs to know about a member.

    ``instance_id`` (``group.instance.id``) is used by the range and round-robin assignors to
    order members, so a static member keeps its slot across restarts whatever its member id.
    """

    topics: frozenset[str]
    instance_id: str | None = None


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    """All partitions of ``topic`` given its partition count."""
    return [TopicPartition(topic, p) for p in range(count)]


class OffsetKey(NamedTuple):
    """The ``__consumer_offsets`` key of a committed offset."""

    group: str
    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the next offset to consume, the leader epoch of the last consumed
    record (for truncation detection, KIP-320), free-form client metadata, and when."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp_ms: int = 0
