"""``spark.readStream.format("sluice")``: Structured Streaming over the broker fetch API.

The driver keeps the query's position as Kafka's JSON offsets, ``{"topic": {"0": 23}}``
(what Spark writes to the checkpoint's offset log), and plans each micro-batch as offset
ranges the executors read exactly as a batch read does (``reading.py``). A micro-batch's
ranges depend only on its start and end offsets, so after a restart Spark replays an
uncommitted batch over exactly the same records.

- **Start**: ``initialOffset`` resolves ``startingOffsets`` (default ``latest``), or
  ``startingTimestamp`` / ``startingOffsetsByTimestamp``, with ListOffsets on the leaders.
- **Each trigger** (``latestOffset``): the current partitions of the subscription and their
  high watermarks. A partition new since the start offsets is read from offset 0 (Kafka's
  "new partitions start at earliest"; if retention already removed its first records, that
  is data loss). A partition that disappeared, or whose high watermark went below the
  position, is data loss too: the query fails with ``failOnDataLoss`` or logs it and goes on.
- **Limits**: ``maxOffsetsPerTrigger`` (``stream_limits.rate_limit``),
  ``minOffsetsPerTrigger`` with ``maxTriggerDelay`` (``stream_limits.TriggerDelay``). Spark's
  read limit reaches the Python source as an opaque value: the source's default limit is
  ``ReadMaxRows``/``ReadMinRows`` when these options are set, and ``ReadAllAvailable`` from
  the engine (``Trigger.Once``) reads everything. ``Trigger.AvailableNow`` fixes the target
  at its start (``prepareForTriggerAvailableNow``), honours ``maxOffsetsPerTrigger`` and
  ignores ``minOffsetsPerTrigger`` (waiting for records that will not be read makes no sense).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spark.datasource.options import SourceOptions
from spark.datasource.plan import (
    OffsetRange,
    TopicPartition,
    as_doc,
    client_for,
    from_doc,
    latest,
    plan_ranges,
    resolve,
    subscribed,
)
from spark.datasource.reading import DataLossError
from spark.datasource.stream_limits import TriggerDelay, backlog, rate_limit

logger = logging.getLogger("sluice.spark.stream")


def losses(start: dict[TopicPartition, int], now: dict[TopicPartition, int]) -> list[str]:
    """What the current high watermarks say was lost since ``start``: partitions gone, or
    whose log now ends below the position (truncated, or deleted and created again)."""
    out = []
    for tp, pos in sorted(start.items()):
        if tp not in now:
            out.append(f"{tp[0]}-{tp[1]} no longer exists (read up to offset {pos})")
        elif now[tp] < pos:
            out.append(
                f"{tp[0]}-{tp[1]} now ends at offset {now[tp]}, below the position {pos} "
                "(the log was truncated or the topic created again)"
            )
    return out


def _now_ms() -> float:
    return time.time() * 1000


class SluiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and planning; executor side: ``read`` (the reader is pickled)."""

    def __init__(self, opts: SourceOptions, read_partition) -> None:
        self.opts = opts
        self._read_partition = read_partition
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._delay = (
            TriggerDelay(opts.min_offsets_per_trigger, opts.max_trigger_delay_ms)
            if opts.min_offsets_per_trigger
            else None
        )

    # -- driver -----------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        client = client_for(self.opts)
        try:
            metas = subscribed(client, self.opts.subscription)
            return as_doc(resolve(client, metas, self.opts.starting, self.opts, ending=False))
        finally:
            client.close()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._high_watermarks()

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else as_doc(self._latest)

    def _high_watermarks(self) -> dict[TopicPartition, int]:
        client = client_for(self.opts)
        try:
            return latest(client, subscribed(client, self.opts.subscription), self.opts)
        finally:
            client.close()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        position = from_doc(start)
        now = self._high_watermarks()
        self._latest = now
        problems = losses(position, now)
        if problems:
            self._data_loss(problems)
        if self._target is not None:  # Trigger.AvailableNow: nothing past the target
            now = {tp: min(o, self._target[tp]) for tp, o in now.items() if tp in self._target}
            now = {tp: max(o, position.get(tp, 0)) for tp, o in now.items()}
        if isinstance(limit, ReadAllAvailable):
            end = now
        else:
            waiting = backlog(position, now)
            if self._delay and self._target is None and self._delay.hold(waiting, _now_ms()):
                return start
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            end = rate_limit(cap, position, now) if cap else now
        if end == position:
            return start
        return as_doc(end)

    def _data_loss(self, problems: list[str]) -> None:
        message = "; ".join(problems)
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"{message}. Some records may have been missed; set failOnDataLoss=false "
                "to go on from where the partitions are now"
            )
        logger.warning("%s; going on (failOnDataLoss=false)", message)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        first, last = from_doc(start), from_doc(end)
        if first == last:
            return []
        client = client_for(self.opts)
        try:
            metas = subscribed(client, self.opts.subscription)
        finally:
            client.close()
        ranges = {tp: e for tp, e in last.items() if tp in metas}
        for tp in sorted(set(last) - set(metas)):
            self._data_loss([f"{tp[0]}-{tp[1]} no longer exists"])
        return plan_ranges(
            metas,
            first,
            ranges,
            self.opts.max_records_per_partition,
            self.opts.min_partitions,
        )

    def commit(self, end: dict) -> None:
        """Nothing to do: the position lives in Spark's checkpoint, not in a group."""

    # -- executor ---------------------------------------------------------------------------

    def read(self, partition):
        return self._read_partition(partition)
