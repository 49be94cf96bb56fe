"""The pure core of the Spark sink's no-duplicate rule (docs/analytics.md, "Sink").

A task writes as an idempotent producer whose id is derived from (write, micro-batch, Spark
partition), so every attempt of the task, and a restarted query's replay of a micro-batch,
is the same producer. A record's sequence number on a topic-partition is its position among
the task's records routed there, because every attempt routes the same input the same way
(the ``partition`` column, else murmur2 of the key, else ``KeylessPartitioner``, whose
choice depends only on the input). An attempt asks the leader for the producer's last sequence on
each partition it writes (``resume_point``) and skips that many records there: the broker
holds each sequence at most once, so no attempt appends a record an earlier one appended.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from brokernodes.records.partitioner import murmur2

CLIENT_CHOSEN_MIN = 1 << 62  # brokernodes.server.producer_ids never hands these out
PRODUCER_EPOCH = 0


class SinkError(Exception):
    """A write the sink cannot do; ``error_code`` is stable, the message says what to do."""

    def __init__(self, message: str, error_code: str = "SINK_ERROR") -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code


def producer_id_for(write_id: str, batch_id: int, spark_partition: int) -> int:
    """The producer id of one Spark partition of one write (or micro-batch): the same for
    every attempt, and in the range the brokers never allocate."""
    digest = hashlib.blake2b(
        f"{write_id}/{batch_id}/{spark_partition}".encode(), digest_size=8
    ).digest()
    return CLIENT_CHOSEN_MIN | (int.from_bytes(digest, "big") & (CLIENT_CHOSEN_MIN - 1))


Content = tuple  # (key, value, headers): bytes or None, bytes or None, ((str, bytes|None), ...)


def content(key, value, headers) -> Content:
    """A record as the log holds it, for comparing a row with what was appended."""
    return (
        key.encode() if type(key) is str else key,
        value.encode() if type(value) is str else value,
        tuple((k, v) for k, v in headers or ()),
    )


@dataclass
class PartitionProgress:
    """One topic-partition of a task: records routed to it so far, and how many of the
    first ones an earlier attempt already appended (skipped here).

    ``last_batch`` (the contents of the earlier attempt's last batch there, read back from
    the log) checks that this attempt's input is the same as that attempt's: the skipped
    records at those positions must equal them, or the task fails (``INPUT_CHANGED``)
    rather than append a row twice or skip one that was never written."""

    already_written: int
    last_batch: list[Content] | None = None
    routed: int = 0
    _seen: list[Content] | None = None

    def admit(self) -> bool:
        """Count one more routed record; True when it must be sent."""
        self.routed += 1
        return self.routed > self.already_written

    def verifying(self) -> bool:
        """Whether the record just counted (and skipped) is one of ``last_batch``'s."""
        return self.last_batch is not None and self.routed > self.already_written - len(
            self.last_batch
        )

    def observe(self, record: Content, where: str) -> None:
        """A skipped record at a ``last_batch`` position; the last one settles it."""
        assert self.last_batch is not None
        if self._seen is None:
            self._seen = []
        self._seen.append(record)
        if self.routed == self.already_written:
            seen, self._seen = self._seen, None
            if seen != self.last_batch:
                raise SinkError(
                    f"{where}: the rows of this task attempt differ from the earlier "
                    f"attempt's at positions {self.routed - len(seen) + 1}..{self.routed}, "
                    "so what it appended cannot be skipped safely; the input's order is not "
                    "the same on every attempt (rows after a shuffle on a cluster): sort "
                    "within partitions before writing (df.sortWithinPartitions(...))",
                    "INPUT_CHANGED",
                )
            self.last_batch = None

    def finish(self, where: str) -> None:
        """At the end of the task: fewer records routed here than an earlier attempt
        appended means the input changed too."""
        if self.routed < self.already_written:
            raise SinkError(
                f"{where}: an earlier attempt of this task appended {self.already_written} "
                f"records here, this one has only {self.routed}: its input is not the same; "
                "make the write's input deterministic (sort within partitions)",
                "INPUT_CHANGED",
            )


def resume_point(answer: dict, producer_id: int, epoch: int = PRODUCER_EPOCH) -> int | None:
    """How many records this producer already appended to the partition, from the broker's
    ``GET .../producers/{id}`` answer; None while its last batch is above the high watermark
    (not yet on every in-sync replica: ask again)."""
    if int(answer.get("producer_id", -1)) != producer_id:
        raise SinkError(
            f"the broker described producer {answer.get('producer_id')}, not {producer_id}",
            "UNKNOWN_SERVER_ERROR",
        )
    seq = int(answer.get("last_sequence", -1))
    if seq < 0:
        return 0
    found = int(answer.get("producer_epoch", -1))
    if found != epoch:
        raise SinkError(
            f"producer id {producer_id} is in use with epoch {found} by another writer; "
            "rerun the write (a new write gets a new id)",
            "INVALID_PRODUCER_EPOCH",
        )
    if int(answer.get("last_offset", -1)) >= int(answer.get("high_watermark", 0)):
        return None
    return seq + 1


class KeylessPartitioner:
    """Sticky partitions for keyless records that depend only on the input: a run starts
    on a partition picked from the producer id and moves to the next one after about
    ``sticky_bytes`` (the producer's batch size). Kafka's sticky partitioner moves on when a
    batch is sent, which depends on timing; a retried task must route the same records to
    the same partitions."""

    def __init__(self, seed: int, sticky_bytes: int) -> None:
        self.seed = seed
        self.sticky_bytes = sticky_bytes
        self._state: dict[str, list[int]] = {}  # topic -> [partition, bytes in the run]

    def partition(self, topic: str, num_partitions: int, size: int) -> int:
        state = self._state.get(topic)
        if state is None:
            state = self._state[topic] = [self.seed % num_partitions, 0]
        elif state[1] >= self.sticky_bytes:
            state[0] = (state[0] + 1) % num_partitions
            state[1] = 0
        state[1] += size
        return state[0] % num_partitions


def key_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
