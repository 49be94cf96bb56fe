"""Usage metering: what each tenant's principals did per topic, appended to ``__usage``.

Three parts, one job each:

- ``UsageAccumulator`` (pure): counters keyed by (tenant, principal, topic) for the current
  window: bytes and records in and out, requests, throttle time. ``drain(now_ms)`` hands back
  the window as ``UsageRecord`` s and starts the next one.
- the record format (``encode_usage``/``decode_usage``): key ``tenant\\0principal\\0topic``
  (UTF-8), value a version byte-pair then compact JSON, one record per key and window. The
  Spark DataSource reads it back with ``decode_usage``.
- ``UsageMeter`` (the thin shell): the broker's hooks call it (``on_request`` from
  ``Broker.authorize``, ``on_in``/``on_out``/``on_throttle`` from ``BrokerMetrics``); it
  remembers the request's principal and topic in context variables (aiohttp runs each request
  in its own task), and its flusher task appends each window to ``__usage`` every
  ``SLUICE_USAGE_INTERVAL_S`` seconds (default 60).

The broker appends to a partition of ``__usage`` it leads (chosen by broker id); a broker
that leads none sends its records to the leader of partition ``broker_id % partitions`` as a
binary produce with the cluster secret (``brokernodes.server.operator`` admits that one
write). Without a target it keeps its windows and retries at the next tick (at most
``MAX_PENDING_RECORDS`` are kept, the oldest dropped first and counted in
``dropped_records``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import struct
import time
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.metadata.cluster import current_tenant

logger = logging.getLogger("sluice.broker.usage")

USAGE_TOPIC = "__usage"
VALUE_VERSION = 1
DEFAULT_INTERVAL_S = 60.0
MAX_PENDING_RECORDS = 100_000
_FIELDS = ("bytes_in", "bytes_out", "records_in", "records_out", "requests", "throttle_ms")

UsageKey = tuple[str, str, str]  # (tenant, principal, topic); "" where not known


@dataclass(slots=True)
class UsageCounters:
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    requests: int = 0
    throttle_ms: int = 0


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One key's usage over ``[window_start_ms, window_end_ms)`` on one broker."""

    tenant: str
    principal: str
    topic: str
    window_start_ms: int
    window_end_ms: int
    broker_id: int
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    requests: int = 0
    throttle_ms: int = 0


@dataclass
class UsageAccumulator:
    """Counters for the current window (pure: the caller passes the clock)."""

    window_start_ms: int
    counters: dict[UsageKey, UsageCounters] = field(default_factory=dict)

    def counters_for(self, key: UsageKey) -> UsageCounters:
        c = self.counters.get(key)
        if c is None:
            c = self.counters[key] = UsageCounters()
        return c

    def add(self, key: UsageKey, **amounts: int) -> None:
        c = self.counters_for(key)
        for name, n in amounts.items():
            setattr(c, name, getattr(c, name) + int(n))

    def drain(self, now_ms: int, broker_id: int) -> list[UsageRecord]:
        """The window ``[window_start_ms, now_ms)`` as records (keys with any usage), and
        a fresh window from ``now_ms``."""
        out = [
            UsageRecord(
                t,
                p,
                topic,
                self.window_start_ms,
                now_ms,
                broker_id,
                **{f: getattr(c, f) for f in _FIELDS},
            )
            for (t, p, topic), c in sorted(self.counters.items())
            if any(getattr(c, f) for f in _FIELDS)
        ]
        self.counters = {}
        self.window_start_ms = now_ms
        return out


# --- the __usage record format -------------------------------------------------------------


def usage_key(r: UsageRecord) -> bytes:
    return "\0".join((r.tenant, r.principal, r.topic)).encode()


def encode_usage(r: UsageRecord) -> tuple[bytes, bytes]:
    body = {
        "tenant": r.tenant,
        "principal": r.principal,
        "topic": r.topic,
        "window_start_ms": r.window_start_ms,
        "window_end_ms": r.window_end_ms,
        "broker_id": r.broker_id,
        **{f: getattr(r, f) for f in _FIELDS},
    }
    value = (
        struct.pack(">h", VALUE_VERSION)
        + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    )
    return usage_key(r), value


def decode_usage(value: bytes) -> UsageRecord:
    """A ``__usage`` value back to a ``UsageRecord``; ``ValueError`` when unreadable."""
    try:
        (version,) = struct.unpack_from(">h", value, 0)
        doc = json.loads(value[2:].decode())
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"malformed __usage value: {e}") from None
    if version != VALUE_VERSION or not isinstance(doc, dict):
        raise ValueError(f"unknown __usage value version {version}")
    return UsageRecord(
        tenant=str(doc.get("tenant") or ""),
        principal=str(doc.get("principal") or ""),
        topic=str(doc.get("topic") or ""),
        window_start_ms=int(doc["window_start_ms"]),
        window_end_ms=int(doc["window_end_ms"]),
        broker_id=int(doc.get("broker_id", -1)),
        **{f: int(doc.get(f) or 0) for f in _FIELDS},
    )


def usage_batch(records: Iterable[UsageRecord], timestamp_ms: int) -> bytearray:
    return bytearray(encode_batch(Record(timestamp_ms, *encode_usage(r)) for r in records))


# --- the broker shell -----------------------------------------------------------------------

_principal: ContextVar[str] = ContextVar("sluice_usage_principal", default="")
_topic: ContextVar[str] = ContextVar("sluice_usage_topic", default="")


def interval_from_env() -> float:
    try:
        return max(0.05, float(os.environ.get("SLUICE_USAGE_INTERVAL_S", DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


class UsageMeter:
    """The broker's meter: hooks feed the accumulator, ``run`` flushes it every interval.

    ``append(topic, partition, batch)`` is the broker's replica append (bypassing metrics, so
    metering is not metered); ``image()`` the global metadata image."""

    def __init__(
        self,
        image: Callable[[], Any],
        append: Callable[[str, int, bytearray], Awaitable[Any]],
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.time,
        cluster_secret: str = "",
    ) -> None:
        self._secret = cluster_secret
        self._image = image
        self._append = append
        self._clock = clock
        self.interval_s = interval_from_env() if interval_s is None else interval_s
        self.acc = UsageAccumulator(self._now_ms())
        self.pending: list[UsageRecord] = []
        self.dropped_records = 0
        self._task: asyncio.Task | None = None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @staticmethod
    def _key(topic: str | None = None) -> UsageKey:
        return (
            current_tenant.get() or "",
            _principal.get(),
            _topic.get() if topic is None else topic,
        )

    # hooks (each one line at its call site)
    # on_request, on_in and on_out run once or twice per request: they update the
    # counters directly rather than through ``UsageAccumulator.add``'s keyword loop
    def on_request(self, principal: Any, resource_type: str, resource_name: str) -> None:
        """An authorized request: remember who and which topic for this task; count it."""
        name = getattr(principal, "name", "") or ""
        topic = resource_name if resource_type.lower() == "topic" else ""
        _principal.set(name)
        _topic.set(topic)
        self.acc.counters_for((current_tenant.get() or "", name, topic)).requests += 1

    def on_in(self, topic: str, nbytes: int, records: int) -> None:
        c = self.acc.counters_for(self._key(topic))
        c.bytes_in += int(nbytes)
        c.records_in += int(records)

    def on_out(self, topic: str, nbytes: int, records: int) -> None:
        c = self.acc.counters_for(self._key(topic))
        c.bytes_out += int(nbytes)
        c.records_out += int(records)

    def on_throttle(self, seconds: float) -> None:
        self.acc.add(self._key(), throttle_ms=round(seconds * 1000))

    # the flusher
    def usage_partition(self) -> tuple[str, int] | None:
        """(name to append under in the global image, partition) of the ``__usage``
        partition this broker leads, or None. Static metadata names it ``__usage``; under
        the control plane it is an internal topic (tenants cannot name topics ``__*``), found
        in the one view that holds that name, and appended under its global name."""
        image = self._image()
        root = image.root or image
        topic = usage_topic(root)
        if topic is None or not topic.partitions:
            return None
        led = [p.partition for p in topic.partitions if p.leader == root.broker_id]
        if not led:
            return None
        return topic.name, led[root.broker_id % len(led)]

    async def flush(self) -> int:
        """Drain the window and append what is pending; returns records appended."""
        image = self._image()
        self.pending += self.acc.drain(self._now_ms(), image.broker_id)
        if len(self.pending) > MAX_PENDING_RECORDS:
            self.dropped_records += len(self.pending) - MAX_PENDING_RECORDS
            self.pending = self.pending[-MAX_PENDING_RECORDS:]
        if not self.pending:
            return 0
        target = self.usage_partition()
        remote = None if target is not None else self.remote_partition()
        if target is None and remote is None:
            return 0
        records, self.pending = self.pending, []
        batch = usage_batch(records, self._now_ms())
        try:
            if target is not None:
                await self._append(target[0], target[1], batch)
            else:
                await self._send(*remote, batch)
        except Exception as e:  # keep the window for the next tick; never kill the broker
            self.pending = records + self.pending
            logger.warning("could not append %d usage records: %s", len(records), e)
            return 0
        return len(records)

    def remote_partition(self) -> tuple[str, str, int] | None:
        """(leader URL, global topic name, partition) of the ``__usage`` partition this
        broker sends to when it leads none (``broker_id % partitions``); None without a
        cluster secret (static brokers) or a leader."""
        image = self._image()
        root = image.root or image
        topic = usage_topic(root)
        if not self._secret or topic is None or not topic.partitions:
            return None
        info = topic.partitions[root.broker_id % len(topic.partitions)]
        url = root.broker_url(info.leader)
        return (url, topic.name, info.partition) if url else None

    async def _send(self, url: str, topic: str, partition: int, batch: bytearray) -> None:
        """Binary produce to the leader with the cluster secret (the one write it allows)."""
        import aiohttp

        path = f"{url}/sluice/v1/topics/{topic}/partitions/{partition}/batches"
        headers = {
            "Authorization": f"Cluster {self._secret}",
            "Content-Type": "application/vnd.kafka.recordbatch.v2",
        }
        timeout = aiohttp.ClientTimeout(total=10)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(path, data=bytes(batch), headers=headers) as resp,
        ):
            if resp.status != 200:
                raise RuntimeError(f"{url} refused usage records: {resp.status}")

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.flush()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="usage-flush")

    async def close(self) -> None:
        """Stop the ticks and flush the last window (best effort)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as e:
            logger.warning("last usage flush failed: %s", e)


def usage_topic(root: Any) -> Any:
    """The global image's ``__usage`` ``TopicInfo`` (keyed by name, or by topic id under the
    control plane), or None when the cluster has none."""
    topic = root.topics.get(USAGE_TOPIC)
    if topic is not None:
        return topic
    for view in (root.tenants or {}).values():
        internal = view.topics.get(USAGE_TOPIC)
        if internal is not None:
            return root.topics.get(internal.topic_id)
    return None
