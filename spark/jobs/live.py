"""The live analytics job: consumer lag and throughput per minute, kept current by two
long-running Structured Streaming queries (docs/analytics.md, "Live analytics").

- **Commits**: ``readStream.format("sluice")`` over ``__consumer_offsets``; each micro-batch
  is reduced in Spark to the last commit per group partition (``live.latest_commits``) and
  merged into the job's commit state on the driver (``live_state.merge_commits``).
- **Usage**: the same over ``__usage``; each micro-batch becomes each topic's records and
  bytes in and out per minute (``live.usage_minutes``), added to the open minutes
  (``live_state.merge_minutes``); the minutes it touched go to the sink as absolute totals.
- **Lag samples**: every ``interval_s`` the driver samples every tenant topic's log end
  offsets with ListOffsets and hands the sink one row per group partition (its last commit
  carried forward) and per group and topic (summed) for the minute (``lag_sample``). A
  commit stream alone would miss a consumer that stopped: no commits, no micro-batch.

Exactly once into the sink: each query's checkpoint holds its offsets (Spark's offset and
commit logs) and, beside them, the job's state after every batch (``StateLog``: one JSON file
per batch id). A batch Spark runs again after a restart starts from the state saved before
it and hands the sink the same absolute rows, which the sink upserts by key. The sink is
whatever the caller passes (``LiveSink``): the control plane's tables
(``manage.py analytics_live``) or JSON lines (``python -m spark.jobs live``). This module
never imports Django.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from spark.datasource.broker import BrokerReadError, PartitionMeta
from spark.jobs.common import Source, TopicRef, rows
from spark.transforms import live
from spark.transforms.live_state import (
    DEFAULT_LATENESS_MS,
    LiveState,
    lag_sample,
    merge_commits,
    merge_minutes,
)

logger = logging.getLogger("sluice.spark.live")

DEFAULT_INTERVAL_S = 30.0
DEFAULT_RETENTION_MS = 24 * 3_600_000
# The first Python streaming source a JVM starts adds entries to a map that every "sluice"
# read shares (Spark's PythonStreamingSourceRunner.init puts SPARK_LOCAL_DIRS and others
# into the registered data source's envVars, in place). A task serialized for the other
# query at that moment carries a torn copy of the map and fails to deserialize
# (java.io.OptionalDataException), failing the query. Each query is therefore started only
# once the one before it has its source running: later inits replace values, never add keys.
SOURCE_INIT_TIMEOUT_S = 120.0
_STARTING = ("Initializing StreamExecution", "Initializing sources")
KEPT_STATES = 3  # state files kept per stream (the one a replay needs, and spares)


class LiveSink(Protocol):
    """Where the rows go. Both calls must be idempotent per key (upserts)."""

    def lag(self, partitions: list[dict], groups: list[dict], *, sampled_ms: int) -> None: ...

    def throughput(self, rows: list[dict], *, measured_from_ms: int, as_of_ms: int) -> None: ...


class StateLog:
    """The job's state after each micro-batch of one query, as ``<dir>/<batch id>.json``
    (written to a temporary file and renamed, so a crash leaves the old file or the new)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _ids(self) -> list[int]:
        return sorted(int(p.stem) for p in self.dir.glob("*.json") if p.stem.isdigit())

    def load_before(self, batch_id: int) -> LiveState:
        """The state a batch starts from: the newest saved by an earlier batch."""
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return LiveState()
        return LiveState.from_doc(json.loads((self.dir / f"{earlier[-1]}.json").read_text()))

    def latest(self) -> LiveState:
        return self.load_before(2**63)

    def save(self, batch_id: int, state: LiveState) -> None:
        tmp = self.dir / f".{batch_id}.json.tmp"
        tmp.write_text(json.dumps(state.to_doc()))
        os.replace(tmp, self.dir / f"{batch_id}.json")
        for old in self._ids()[:-KEPT_STATES]:
            (self.dir / f"{old}.json").unlink(missing_ok=True)


def sample_log_ends(client, topics: list[TopicRef]) -> dict[tuple[str, str], dict[int, int | None]]:
    """``{(tenant, topic name): {partition: log end offset}}`` from one metadata request and
    ListOffsets ``latest`` on each partition's leader (None where the leader did not
    answer). A topic the brokers do not know yet has no partitions."""
    doc = client.metadata()
    urls = {int(b["id"]): b["url"] for b in doc.get("brokers", [])}
    by_name = {t["name"]: t for t in doc.get("topics", [])}
    out: dict[tuple[str, str], dict[int, int | None]] = {}
    for ref in topics:
        ends: dict[int, int | None] = {}
        for p in (by_name.get(ref.name) or {}).get("partitions", []):
            meta = PartitionMeta(
                ref.name, int(p["partition"]), int(p["leader"]), urls.get(int(p["leader"]))
            )
            try:
                ends[meta.partition] = client.list_offset(meta, "latest")
            except (BrokerReadError, OSError) as e:
                logger.warning("live lag: no log end for %s-%s: %s", ref.shown, meta.partition, e)
                ends[meta.partition] = None
        out[(ref.tenant, ref.shown)] = ends
    return out


@dataclass(frozen=True)
class LiveConfig:
    checkpoint: str  # directory: one sub-directory per query
    interval_s: float = DEFAULT_INTERVAL_S  # trigger and lag-sample interval
    lateness_ms: int = DEFAULT_LATENESS_MS
    retention_ms: int = DEFAULT_RETENTION_MS  # rows older than this are not handed on
    max_offsets_per_trigger: int | None = None


def wait_sources_initialized(query, timeout_s: float, stop: threading.Event | None = None) -> None:
    """Return once ``query`` is past initialising its sources (or has stopped, or ``stop``
    is set), polling its status; after ``timeout_s`` go on with a warning (the next query
    then risks the race above rather than never starting)."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["message"] in _STARTING:
        if stop is not None and stop.is_set():
            return
        if time.monotonic() >= deadline:
            logger.warning(
                "live query %s: sources still initialising after %.0f s; going on",
                query.name,
                timeout_s,
            )
            return
        time.sleep(0.05)


class LiveJob:
    """The two queries, their state and the lag sampler. ``topics()`` names the tenant
    topics whose log ends are sampled (called at every sample: new topics join)."""

    def __init__(
        self,
        spark,
        source: Source,
        *,
        offsets_topic: TopicRef,
        usage_topic: TopicRef,
        topics: Callable[[], list[TopicRef]],
        sink: LiveSink,
        config: LiveConfig,
    ) -> None:
        self.spark = spark
        self.source = source
        self.offsets_topic = offsets_topic
        self.usage_topic = usage_topic
        self.topics = topics
        self.sink = sink
        self.config = config
        root = Path(config.checkpoint)
        self.commit_states = StateLog(root / "commits" / "state")
        self.usage_states = StateLog(root / "usage" / "state")
        self._lock = threading.Lock()  # the commit state and the sink, between threads
        self._commits = self.commit_states.latest().commits  # a restart resumes from here
        self.queries: list = []

    # -- micro-batches (called by Spark's foreachBatch, on the driver) ----------------------

    def on_commits(self, df, batch_id: int) -> None:
        started = time.monotonic()
        latest = rows(live.latest_commits(df))
        state = self.commit_states.load_before(batch_id)
        state.commits = merge_commits(state.commits, latest)
        self.commit_states.save(batch_id, state)
        with self._lock:
            self._commits = state.commits
        logger.info(
            "live commits: batch %s: %d group partitions changed, %d known, %.0f ms",
            batch_id,
            len(latest),
            len(state.commits),
            (time.monotonic() - started) * 1000,
        )

    def on_usage(self, df, batch_id: int) -> None:
        started = time.monotonic()
        now = int(time.time() * 1000)
        state = self.usage_states.load_before(batch_id)
        if state.measured_from_ms is None:
            state.measured_from_ms = self._usage_start_ms(now)
        merged = merge_minutes(
            state.minutes,
            state.max_minute_ms,
            rows(live.usage_minutes(df)),
            lateness_ms=self.config.lateness_ms,
        )
        if merged.late_windows:
            logger.warning(
                "live throughput: batch %s: %d topic-minutes (%d records) arrived after their "
                "minute closed (lateness %d s) and were dropped",
                batch_id,
                merged.late_windows,
                merged.late_records,
                self.config.lateness_ms // 1000,
            )
        keep = now - self.config.retention_ms
        with self._lock:
            self.sink.throughput(
                [r for r in merged.rows if r["minute_ms"] >= keep],
                measured_from_ms=state.measured_from_ms,
                as_of_ms=now,
            )
        state.minutes, state.max_minute_ms = merged.minutes, merged.max_minute_ms
        self.usage_states.save(batch_id, state)
        logger.info(
            "live throughput: batch %s: %d topic-minutes stored, %d open, %.0f ms",
            batch_id,
            len(merged.rows),
            len(state.minutes),
            (time.monotonic() - started) * 1000,
        )

    def _usage_start_ms(self, now_ms: int) -> int:
        return now_ms - self.config.retention_ms

    # -- the sampler ------------------------------------------------------------------------

    def sample_lag(self, now_ms: int | None = None) -> tuple[list[dict], list[dict]]:
        """One lag sample of every group partition against the log ends now; handed to
        the sink and returned."""
        started = time.monotonic()
        client = self.source.client()
        try:
            ends = sample_log_ends(client, self.topics())
        finally:
            client.close()
        now_ms = now_ms or int(time.time() * 1000)
        with self._lock:
            parts, groups = lag_sample(self._commits, ends, now_ms)
            self.sink.lag(parts, groups, sampled_ms=now_ms)
        logger.info(
            "live lag: sample of %d partitions, %d group partitions stored, %.0f ms",
            sum(len(e) for e in ends.values()),
            len(parts),
            (time.monotonic() - started) * 1000,
        )
        return parts, groups

    def heartbeat(self) -> None:
        """The usage stream read everything there was: its minutes are current as of now,
        even when no window arrived (no traffic makes no micro-batch)."""
        usage = next((q for q in self.queries if q.name == "sluice-live-usage"), None)
        if usage is None or usage.status.get("isDataAvailable") or usage.status["isTriggerActive"]:
            return
        state = self.usage_states.latest()
        now = int(time.time() * 1000)
        with self._lock:
            self.sink.throughput(
                [],
                measured_from_ms=state.measured_from_ms or self._usage_start_ms(now),
                as_of_ms=now,
            )

    # -- the queries ------------------------------------------------------------------------

    def _stream(self, ref: TopicRef, decode: str, **options: str):
        r = self.spark.readStream.format("sluice").options(**self.source.options())
        r = r.option("topic", ref.name).option("decode", decode)
        r = r.option("failOnDataLoss", "false")  # __usage expires after 7 days
        if self.config.max_offsets_per_trigger:
            r = r.option("maxOffsetsPerTrigger", str(self.config.max_offsets_per_trigger))
        return r.options(**options).load()

    def start(self, *, available_now: bool = False, stop: threading.Event | None = None) -> list:
        """Start both queries, each once the one before has its source running (see
        ``SOURCE_INIT_TIMEOUT_S``); ``available_now``: read what is there now and stop, for a
        bounded run. Once ``stop`` is set no further query is started."""
        root = Path(self.config.checkpoint)
        now = int(time.time() * 1000)
        plans = (
            (
                "sluice-live-commits",
                self._stream(self.offsets_topic, "consumer_offsets", startingOffsets="earliest"),
                self.on_commits,
                root / "commits" / "spark",
            ),
            (
                "sluice-live-usage",
                self._stream(
                    self.usage_topic,
                    "usage",
                    startingTimestamp=str(self._usage_start_ms(now)),
                    startingOffsetsByTimestampStrategy="latest",
                ),
                self.on_usage,
                root / "usage" / "spark",
            ),
        )
        for name, df, handler, checkpoint in plans:
            if self.queries:
                wait_sources_initialized(self.queries[-1], SOURCE_INIT_TIMEOUT_S, stop)
            if stop is not None and stop.is_set():
                break
            w = df.writeStream.queryName(name).foreachBatch(handler)
            w = w.option("checkpointLocation", str(checkpoint))
            if available_now:
                w = w.trigger(availableNow=True)
            else:
                w = w.trigger(processingTime=f"{self.config.interval_s:g} seconds")
            self.queries.append(w.start())
        return self.queries

    def stop(self) -> None:
        """Stop the queries; a query that cannot be reached (the JVM already gone: a
        process-group SIGTERM reaches it too) is past stopping."""
        for q in self.queries:
            try:
                q.stop()
            except Exception as e:  # stopping is best effort
                logger.info("live query %s: stop: %s", q.name, e)
        self.queries = []

    def check(self) -> None:
        """Raise the first query's failure (a dead query must end the process, so its
        supervisor restarts it from the checkpoint)."""
        for q in self.queries:
            e = q.exception()
            if e is not None:
                raise RuntimeError(f"live query {q.name} failed: {e}") from None

    def run(self, stop: threading.Event, *, ticks: int | None = None) -> None:
        """Until ``stop`` is set (or ``ticks`` samples): start the queries, sample the lag
        every ``interval_s``, mark the usage stream current when it is idle."""
        if stop.is_set():
            return
        n = 0
        try:
            self.start(stop=stop)  # inside: a query started before a failure is stopped
            while not stop.is_set() and (ticks is None or n < ticks):
                self.check()
                try:
                    self.sample_lag()
                    self.heartbeat()
                except (BrokerReadError, OSError) as e:  # a broker down: next tick
                    logger.warning("live lag sample skipped: %s", e)
                n += 1
                stop.wait(self.config.interval_s)
        finally:
            self.stop()

    def run_available_now(self, timeout_s: float = 300) -> None:
        """A bounded run: both queries read what is there now, then one lag sample."""
        try:
            self.start(available_now=True)
            for q in self.queries:
                if not q.awaitTermination(timeout_s):
                    raise TimeoutError(f"live query {q.name} did not finish in {timeout_s} s")
            self.check()
        finally:
            self.stop()
        self.sample_lag()


class JsonLinesSink:
    """``python -m spark.jobs live``: every row as a JSON line on ``out`` (``kind`` says
    which), and a ``current`` line per call with its time."""

    def __init__(self, out) -> None:
        self.out = out

    def _write(self, kind: str, rows_: list[dict], **current) -> None:
        for r in rows_:
            self.out.write(json.dumps({"kind": kind, **r}) + "\n")
        self.out.write(json.dumps({"kind": f"{kind}_current", **current}) + "\n")
        self.out.flush()

    def lag(self, partitions, groups, *, sampled_ms) -> None:
        self._write("lag_partition", partitions)
        self._write("lag_group", groups, sampled_ms=sampled_ms)

    def throughput(self, rows_, *, measured_from_ms, as_of_ms) -> None:
        self._write("throughput", rows_, measured_from_ms=measured_from_ms, as_of_ms=as_of_ms)
