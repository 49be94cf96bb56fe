"""Offset reset planning, as ``kafka-consumer-groups --reset-offsets`` does it, made pure.

:func:`plan_reset` takes each partition's committed offset and log start/end offsets plus an
offset-for-timestamp lookup (``ListOffsets`` by timestamp), and returns a :class:`ResetPlan`:
per partition the previous and new offset and how many records a consumer would re-read
(new < current) or skip (new > current). The plan is the dry run; applying it commits
``plan.offsets()``, so dry run and result agree by construction. Resets apply only to inactive
groups (NON_EMPTY_GROUP otherwise), and the plan keeps the previous offsets:
``plan.undo()`` is the plan that puts them back.

Targets outside [log start, log end] are clamped to the nearest end, as Kafka does. A
partition with no committed offset is shifted from the log start offset.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from brokernodes.groups.errors import InvalidGroupRequestError, NonEmptyGroupError
from brokernodes.groups.group import ConsumerGroup
from brokernodes.groups.types import TopicPartition

__all__ = [
    "PartitionOffsets",
    "ResetEntry",
    "ResetPlan",
    "ResetSpec",
    "ResetStrategy",
    "parse_duration",
    "plan_reset",
]


class ResetStrategy(enum.Enum):
    """The ``--reset-offsets`` scenarios, valued by their option names."""

    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_OFFSET = "to-offset"
    TO_DATETIME = "to-datetime"
    SHIFT_BY = "shift-by"
    BY_DURATION = "by-duration"


@dataclass(frozen=True)
class ResetSpec:
    """A reset scenario and its argument (an offset, a shift, a timestamp or a duration)."""

    strategy: ResetStrategy
    value: int = 0

    @classmethod
    def to_earliest(cls) -> ResetSpec:
        return cls(ResetStrategy.TO_EARLIEST)

    @classmethod
    def to_latest(cls) -> ResetSpec:
        return cls(ResetStrategy.TO_LATEST)

    @classmethod
    def to_offset(cls, offset: int) -> ResetSpec:
        if offset < 0:
            raise InvalidGroupRequestError(f"reset offset {offset} must not be negative")
        return cls(ResetStrategy.TO_OFFSET, offset)

    @classmethod
    def to_datetime(cls, when: datetime | int) -> ResetSpec:
        """``when`` is an aware datetime or epoch milliseconds."""
        if isinstance(when, datetime):
            if when.tzinfo is None:
                raise InvalidGroupRequestError("a reset datetime needs a time zone")
            when = int(when.timestamp() * 1000)
        return cls(ResetStrategy.TO_DATETIME, when)

    @classmethod
    def shift_by(cls, n: int) -> ResetSpec:
        return cls(ResetStrategy.SHIFT_BY, n)

    @classmethod
    def by_duration(cls, duration: timedelta | int | str) -> ResetSpec:
        """``duration`` back from now: a timedelta, milliseconds, or ISO 8601 (``PT1H30M``)."""
        if isinstance(duration, str):
            duration = parse_duration(duration)
        if isinstance(duration, timedelta):
            duration = int(duration.total_seconds() * 1000)
        if duration < 0:
            raise InvalidGroupRequestError("a reset duration must not be negative")
        return cls(ResetStrategy.BY_DURATION, duration)


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """An ISO 8601 duration as ``--by-duration`` takes it (``PnDTnHnMnS``)."""
    m = _DURATION.match(text.strip().upper())
    if m is None or text.strip().upper() in ("P", "PT"):
        raise InvalidGroupRequestError(f"{text!r} is not a duration like P1DT2H30M")
    return timedelta(
        days=int(m["d"] or 0),
        hours=int(m["h"] or 0),
        minutes=int(m["m"] or 0),
        seconds=float(m["s"] or 0),
    )


@dataclass(frozen=True)
class PartitionOffsets:
    """What the plan needs to know about one partition."""

    log_start_offset: int
    log_end_offset: int
    committed: int | None = None


@dataclass(frozen=True)
class ResetEntry:
    """One partition's line of the plan."""

    tp: TopicPartition
    previous: int | None
    new: int
    log_start_offset: int
    log_end_offset: int

    @property
    def records_reread(self) -> int | None:
        """Records consumed again (the reset goes back), None with no committed offset."""
        return None if self.previous is None else max(0, self.previous - self.new)

    @property
    def records_skipped(self) -> int | None:
        """Records never consumed (the reset goes forward), None with no committed offset."""
        return None if self.previous is None else max(0, self.new - self.previous)


@dataclass(frozen=True)
class ResetPlan:
    """A dry-run plan; ``offsets()`` is what to commit, ``deletes`` the committed offsets to
    drop (only an undo has those: partitions that had no offset before the reset)."""

    group_id: str
    entries: tuple[ResetEntry, ...]
    deletes: frozenset[TopicPartition] = field(default_factory=frozenset)

    def offsets(self) -> dict[TopicPartition, int]:
        return {e.tp: e.new for e in self.entries}

    def undo(self) -> ResetPlan:
        """The plan that restores the offsets this one replaces."""
        entries = tuple(
            ResetEntry(e.tp, e.new, e.previous, e.log_start_offset, e.log_end_offset)
            for e in self.entries
            if e.previous is not None
        )
        deletes = frozenset(e.tp for e in self.entries if e.previous is None)
        return ResetPlan(self.group_id, entries, deletes)

    def to_json(self) -> dict[str, object]:
        """The dry-run table, as the API and CLI show it."""
        return {
            "group_id": self.group_id,
            "partitions": [
                {
                    "topic": e.tp.topic,
                    "partition": e.tp.partition,
                    "previous_offset": e.previous,
                    "new_offset": e.new,
                    "log_start_offset": e.log_start_offset,
                    "log_end_offset": e.log_end_offset,
                    "records_reread": e.records_reread,
                    "records_skipped": e.records_skipped,
                }
                for e in self.entries
            ],
            "deletes": [[tp.topic, tp.partition] for tp in sorted(self.deletes)],
        }


OffsetForTimestamp = Callable[[TopicPartition, int], int | None]


def plan_reset(
    group_id: str,
    group: ConsumerGroup | None,
    spec: ResetSpec,
    partitions: Mapping[TopicPartition, PartitionOffsets],
    offset_for_timestamp: OffsetForTimestamp,
    now_ms: int,
) -> ResetPlan:
    """Plan a reset of ``partitions`` (the topics or partitions the operator named).

    ``offset_for_timestamp(tp, ts)`` returns the earliest offset whose timestamp is >= ts, or
    None when there is none (the plan then uses the log end offset, as Kafka does). Raises
    NON_EMPTY_GROUP when ``group`` has members.
    """
    if group is not None and not group.is_empty:
        raise NonEmptyGroupError(
            f"offsets of group {group_id!r} can only be reset while it is inactive; "
            f"it has {len(group.members)} member(s) ({group.state.value})"
        )
    entries = []
    for tp, po in sorted(partitions.items()):
        tp = TopicPartition(*tp)
        start, end = po.log_start_offset, po.log_end_offset
        if not 0 <= start <= end:
            raise InvalidGroupRequestError(f"bad log offsets [{start}, {end}] for {tp}")
        s = spec.strategy
        if s is ResetStrategy.TO_EARLIEST:
            new = start
        elif s is ResetStrategy.TO_LATEST:
            new = end
        elif s is ResetStrategy.TO_OFFSET:
            new = spec.value
        elif s is ResetStrategy.SHIFT_BY:
            new = (start if po.committed is None else po.committed) + spec.value
        else:
            ts = spec.value if s is ResetStrategy.TO_DATETIME else now_ms - spec.value
            found = offset_for_timestamp(tp, ts)
            new = end if found is None else found
        entries.append(ResetEntry(tp, po.committed, min(max(new, start), end), start, end))
    return ResetPlan(group_id, tuple(entries))
