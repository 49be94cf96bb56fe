"""What a log-offsets lookup asks and answers (pure): the question the group service and
cursors put for one partition, and the leader's answer. ``http.log_offsets`` answers them,
reading local partitions and asking other leaders over ``POST /internal/v1/log-offsets``;
the types live here so the coordinator's group service can ask without importing HTTP."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogOffsets:
    log_start_offset: int
    high_watermark: int
    timestamp: int | None = None  # of the record at the asked offset
    offset_for_time: int | None = None  # first offset at/after the asked time
    last_stable_offset: int | None = None  # where a read_committed reader's "latest" is


@dataclass(frozen=True)
class Query:
    topic: str  # tenant-relative name
    partition: int
    timestamp_at: int | None = None  # offset whose record's timestamp is wanted
    offset_at: int | None = None  # timestamp whose offset is wanted
