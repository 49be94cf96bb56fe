"""Producer batches and delivery futures: the part of the producer that never does I/O.

A ``ProducerBatch`` collects ``Record`` tuples for one partition until it is full
(``batch_size`` bytes, estimated) or its linger time is up; the sender then encodes it once,
with the producer id, epoch and base sequence, and keeps those bytes for every retry so the
broker can recognise a resend. ``send`` returns a ``RecordFuture``: a (batch, index) pair,
no per-record asyncio future; its metadata is derived when asked for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from brokernodes.errors import ClientTimeoutError

__all__ = [
    "PartitionQueue",
    "ProducerBatch",
    "RecordFuture",
    "RecordMetadata",
]

log = logging.getLogger("brokernodes.client.producer")

RECORD_OVERHEAD = 16  # length, attributes, deltas, key/value lengths, header count (estimate)


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 with acks=0 (the broker does not say)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerBatch:
    """Records for one partition; completed once, with a base offset or an error."""

    __slots__ = (
        "_callbacks",
        "_event",
        "_future",
        "_lock",
        "attempts",
        "base_offset",
        "base_sequence",
        "created",
        "done",
        "encoded",
        "error",
        "log_append_time",
        "partition",
        "producer_id",
        "records",
        "size",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, created: float, sync: bool, lock: threading.Lock
    ) -> None:
        self._lock = lock  # the producer's: guards done/_callbacks against other threads
        self.topic = topic
        self.partition = partition
        self.created = created
        self.records: list = []
        self.size = 0
        self.encoded: bytes | None = None
        self.producer_id = -1
        self.base_sequence = -1
        self.attempts = 0
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._callbacks: list | None = None
        self._future: asyncio.Future | None = None
        self._event = threading.Event() if sync else None

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={len(self.records)} "
            f"size={self.size} seq={self.base_sequence} done={self.done}>"
        )

    # --- completion (on the sender's loop) ----------------------------------------------

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        self._finish(base_offset, log_append_time, None)

    def fail(self, error: BaseException) -> None:
        self._finish(-1, -1, error)

    def _finish(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            callbacks = self._callbacks
            self._callbacks = None
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)
        if self._event is not None:
            self._event.set()
        if callbacks:
            for index, fn in callbacks:
                _run_callback(fn, self, index)

    def add_callback(self, index: int, fn: Callable) -> None:
        """``fn(error, metadata)`` once the record at ``index`` is delivered or failed (at
        once, in this thread, if it already is). Never call with the producer's lock held."""
        with self._lock:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = [(index, fn)]
                else:
                    self._callbacks.append((index, fn))
                return
        _run_callback(fn, self, index)

    async def wait(self) -> None:
        if self.done:
            return
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._future)

    def wait_blocking(self, timeout: float | None) -> None:
        if self.done:
            return
        if self._event is None:
            raise RuntimeError(
                "this record belongs to an AsyncProducer: await its future instead of "
                "calling result()"
            )
        if not self._event.wait(timeout):
            raise ClientTimeoutError(f"record not delivered within {timeout:g}s")

    def metadata(self, index: int) -> RecordMetadata:
        timestamp = self.log_append_time
        if timestamp == -1:
            timestamp = self.records[index][0]
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, timestamp)


def _run_callback(fn: Callable, batch: ProducerBatch, index: int) -> None:
    try:
        if batch.error is not None:
            fn(batch.error, None)
        else:
            fn(None, batch.metadata(index))
    except Exception:
        log.exception("delivery callback %r raised", fn)


class RecordFuture(tuple):
    """The delivery of one record: ``await fut`` (async) or ``fut.result(timeout)`` (sync)
    give its ``RecordMetadata`` or raise its error.

    A ``(batch, index)`` pair: a tuple subclass, so the producer makes one with a single C
    call (``tuple.__new__``) instead of a Python ``__init__``. Compares by identity."""

    __slots__ = ()

    def __new__(cls, batch: ProducerBatch, index: int) -> RecordFuture:
        return tuple.__new__(cls, (batch, index))

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    @property
    def _batch(self) -> ProducerBatch:
        return self[0]

    @property
    def _index(self) -> int:
        return self[1]

    def __repr__(self) -> str:
        batch = self[0]
        state = "pending" if not batch.done else (batch.error or "delivered")
        return f"<RecordFuture {batch.topic}-{batch.partition} {state}>"

    def done(self) -> bool:
        return self[0].done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self[0]
        batch.wait_blocking(timeout)
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self[1])

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self[0].wait_blocking(timeout)
        return self[0].error

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """``fn(future)`` when done (on the producer's event loop thread)."""
        self[0].add_callback(self[1], lambda _e, _m: fn(self))

    def __await__(self):
        batch = self[0]
        if not batch.done:
            yield from batch.wait().__await__()
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self[1])


class PartitionQueue:
    """Per-partition state of the producer: the open batch, sealed batches waiting to be sent,
    and the idempotence sequence. One request in flight per partition keeps order."""

    __slots__ = (
        "in_flight",
        "next_sequence",
        "open",
        "partition",
        "producer_id",
        "sealed",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.sealed: deque[ProducerBatch] = deque()
        self.in_flight = False
        self.next_sequence = 0
        self.producer_id = -1
