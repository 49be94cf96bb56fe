"""Committed offsets: the pure rules for an ``OffsetCommit`` and the in-memory map the
coordinator serves ``OffsetFetch`` from.

The map is keyed by (group, topic, partition), as ``__consumer_offsets`` is; every change
returns the records to append to that compacted topic (see :mod:`brokernodes.groups.records`),
so the broker persists exactly what it applied and a new coordinator rebuilds the same map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from brokernodes.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from brokernodes.groups.errors import (
    GroupIdNotFoundError,
    InvalidGroupRequestError,
    NonEmptyGroupError,
)
from brokernodes.groups.group import ConsumerGroup
from brokernodes.groups.records import encode_offset_commit, encode_offset_key, group_tombstones
from brokernodes.groups.types import OffsetAndMetadata, OffsetKey, TopicPartition

__all__ = ["OffsetAndMetadata", "OffsetKey", "OffsetStore", "delete_group", "validate_commit"]


def validate_commit(
    group: ConsumerGroup | None,
    member_id: str | None,
    member_epoch: int,
    offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
    *,
    group_id: str = "",
    log_end_offsets: Mapping[TopicPartition, int] | None = None,
) -> None:
    """Check an ``OffsetCommit`` before anything is written; raises the error to answer.

    - a member commit needs a live member at its current epoch, so a zombie (fenced,
      expired, or lagging an epoch behind) is refused: UNKNOWN_MEMBER_ID or
      STALE_MEMBER_EPOCH; a member commit to a group that does not exist is
      GROUP_ID_NOT_FOUND;
    - an admin/standalone commit (no member id, epoch -1) needs an empty or absent group;
    - offsets must be >= 0 (INVALID_REQUEST) and, when ``log_end_offsets`` is given, name a
      known partition (UNKNOWN_TOPIC_OR_PARTITION); an admin or standalone commit (no
      member) must not lie beyond the partition's end (OFFSET_OUT_OF_RANGE). Kafka itself
      does not check the end; Sluice does for commits a person types, so a typo cannot make
      a group silently skip records not written yet. A member's commit is not checked
      against it: a member commits positions it fetched, and right after a failover the new
      leader's high watermark can trail the old one's for a fetch round, which would refuse
      a valid commit of records already read.
    """
    if group is None:
        if member_id or member_epoch >= 0:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    else:
        group.validate_offset_commit(member_id, member_epoch)
    for tp, value in offsets.items():
        offset = value.offset if isinstance(value, OffsetAndMetadata) else value
        if not isinstance(offset, int) or offset < 0:
            raise InvalidGroupRequestError(
                f"offset {offset!r} for {tp[0]}-{tp[1]} must be a non-negative integer"
            )
        if log_end_offsets is not None:
            end = log_end_offsets.get(TopicPartition(*tp))
            if end is None:
                raise UnknownTopicOrPartitionError(f"unknown partition {tp[0]}-{tp[1]}")
            if offset > end and not member_id:
                raise OffsetOutOfRangeError(
                    f"offset {offset} for {tp[0]}-{tp[1]} is beyond the log end offset {end}"
                )


Record = tuple[bytes, bytes | None]


@dataclass
class OffsetStore:
    """The coordinator's committed offsets, keyed by (group, topic, partition)."""

    offsets: dict[OffsetKey, OffsetAndMetadata] = field(default_factory=dict)

    def commit(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> list[Record]:
        """Apply a (validated) commit; returns the ``__consumer_offsets`` records to append."""
        out = []
        for tp, om in sorted(offsets.items()):
            key = OffsetKey(group_id, tp[0], tp[1])
            self.offsets[key] = om
            out.append(encode_offset_commit(key, om))
        return out

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``OffsetFetch``: the group's committed offsets (all, or for ``partitions``)."""
        if partitions is None:
            return {k.tp: v for k, v in self.offsets.items() if k.group == group_id}
        wanted = {TopicPartition(*tp) for tp in partitions}
        return {k.tp: v for k, v in self.offsets.items() if k.group == group_id and k.tp in wanted}

    def groups(self) -> set[str]:
        return {k.group for k in self.offsets}

    def delete(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> list[Record]:
        """Drop committed offsets (``OffsetDelete`` or a group delete); returns tombstones."""
        wanted = None if partitions is None else {TopicPartition(*tp) for tp in partitions}
        keys = [
            k for k in self.offsets if k.group == group_id and (wanted is None or k.tp in wanted)
        ]
        for k in keys:
            del self.offsets[k]
        return [(encode_offset_key(k), None) for k in sorted(keys)]


def delete_group(group_id: str, group: ConsumerGroup | None, store: OffsetStore) -> list[Record]:
    """``DeleteGroups``: only an inactive group (NON_EMPTY_GROUP otherwise) that exists
    (GROUP_ID_NOT_FOUND otherwise); drops its committed offsets and returns the tombstones
    for them and for the group's records."""
    if group is not None and not group.is_empty:
        raise NonEmptyGroupError(f"group {group_id!r} has members; stop them first")
    if group is None and group_id not in store.groups():
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    records = store.delete(group_id)
    if group is not None:
        records += group_tombstones(group)
    return records
