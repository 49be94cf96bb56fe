"""Steady load for fault scenarios: an idempotent acks=all SDK producer, a tailing reader,
a consumer-group member, the final drain through each leader and the raw read of every
replica. Every wait is bounded; everything records into a ``History``.

Nothing is swallowed: a worker thread that dies of an unexpected error keeps it, and its
``stop`` raises it, so the scenario fails. Only what failover is expected to produce is
retried (a connection refused, a retriable broker error, a group commit refused because a
rebalance fenced the member), and it is counted."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from brokernodes.client.group_consumer import CommitFailedError, GroupConsumer
from brokernodes.client.producer import Producer
from brokernodes.errors import BrokerError, ClientTimeoutError, SluiceError
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import iter_batches
from tests.faults.history import History
from tests.integration.replication.cluster import log_records


class Worker:
    """A daemon thread running ``body``; an exception it raises is kept and re-raised by
    ``join`` (a reader or committer that fails fails the scenario)."""

    def __init__(self, name: str, body: Callable[[], None]) -> None:
        self.error: BaseException | None = None
        self._body = body
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self._body()
        except BaseException as e:  # kept for join(): the scenario fails with it
            self.error = e

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self._thread.name} did not stop within {timeout} s")
        if self.error is not None:
            raise AssertionError(f"{self._thread.name} failed: {self.error!r}") from self.error


def retriable_answer(status: int, body: bytes) -> bool:
    """A fetch answer failover can produce: not the leader, not enough replicas, a broker
    whose metadata has not caught up with a new topic or leader yet, ..."""
    error = BrokerError.from_response(status, body)
    return error.retriable or error.error_code == "UNKNOWN_TOPIC_OR_PARTITION"


def _get(url: str, api_key: str, timeout: float = 3.0) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, dict(e.headers), e.read()


def leader_urls(urls: list[str], api_key: str, topic: str) -> dict[int, str]:
    """partition -> leader URL, from the first broker that answers metadata."""
    for url in urls:
        try:
            status, _, body = _get(url + "/sluice/v1/metadata", api_key, timeout=2)
        except OSError:
            continue
        if status != 200:
            continue
        doc = json.loads(body)
        brokers = {b["id"]: b["url"] for b in doc["brokers"]}
        for t in doc["topics"]:
            if t["name"] == topic:
                return {
                    p["partition"]: brokers.get(p["leader"], "")
                    for p in t["partitions"]
                    if p["leader"] >= 0
                }
    return {}


class OffsetOutOfRange(AssertionError):
    """A fetch past the partition's log end: a loss, except after an unclean election
    (``Reader(truncation_allowed=True)``), where the new leader's log may end lower."""

    def __init__(self, message: str, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_end_offset = log_end_offset


def fetch(url: str, api_key: str, topic: str, partition: int, offset: int):
    """(status, high watermark, [(offset, value)]) from one binary fetch."""
    path = (
        f"{url}/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}/batches"
        f"?offset={offset}&max_bytes=1048576"
    )
    status, headers, body = _get(path, api_key)
    if status != 200:
        if status == 416:
            doc = json.loads(body)
            raise OffsetOutOfRange(
                f"fetch {path} answered {status}: {body[:300]!r}", int(doc["log_end_offset"])
            )
        if not retriable_answer(status, body):
            raise AssertionError(f"fetch {path} answered {status}: {body[:300]!r}")
        return status, -1, []
    out = []
    for h in iter_batches(body):
        for r in decode_batch(body, h.position).records:
            if r.offset >= offset:
                out.append((r.offset, (r.value or b"").decode()))
    return status, int(headers.get("Sluice-High-Watermark", -1)), out


class LoadProducer:
    """Sends unique values (``<prefix>-<n>``, n in send order) at a steady rate from a thread
    until ``stop``. A small ``batch_size`` (one record a batch) makes the batches that queue
    behind a partition's request in flight go out several to a request (up to the SDK's
    five), so a failover meets multi-batch requests and their retries."""

    def __init__(
        self,
        history: History,
        urls: list[str],
        api_key: str,
        topic: str,
        *,
        rate: float = 200.0,
        prefix: str = "v",
        request_timeout_ms: int = 3000,
        delivery_timeout_ms: int = 120_000,
        batch_size: int = 16384,
    ) -> None:
        self.history = history
        self.topic = topic
        self.rate = rate
        self.prefix = prefix
        self.producer = Producer(
            ",".join(urls),
            api_key,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            batch_size=batch_size,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=50,
            retry_backoff_max_ms=500,
        )
        self._stop = threading.Event()
        self._worker = Worker(f"fault-load-{prefix}", self._run)
        self.sent = 0
        self.flush_timed_out = False
        self.callback_errors: list[BaseException] = []

    def start(self) -> LoadProducer:
        self._worker.start()
        return self

    def _callback(self, value: str):
        def done(fut) -> None:
            try:
                error = fut.exception(0)
                if error is not None:
                    self.history.fail(value, error)
                else:
                    md = fut.result(0)
                    self.history.ack(value, md.partition, md.offset)
            except BaseException as e:  # raised by stop(): the SDK's loop would only log it
                self.callback_errors.append(e)

        return done

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        i = 0
        while not self._stop.is_set():
            value = f"{self.prefix}-{i}"
            self.history.attempt(value, self.prefix, i)
            i += 1
            try:
                fut = self.producer.send(self.topic, value.encode(), key=value.encode())
            except SluiceError as e:  # buffer full etc.: an attempt failed at once, recorded
                self.history.fail(value, e)
            else:
                fut.add_done_callback(self._callback(value))
            self.sent = i
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def stop(self, flush_timeout: float = 60.0) -> None:
        """Stop sending and wait for the answers; records still unanswered after
        ``flush_timeout`` stay unknown in the history (reported, not dropped)."""
        self._stop.set()
        self._worker.join(10)
        try:
            self.producer.flush(flush_timeout)
        except ClientTimeoutError:
            self.flush_timed_out = True
        self.producer.close(10)
        if self.callback_errors:
            raise AssertionError(
                f"delivery callbacks failed: {self.callback_errors[:3]!r}"
            ) from self.callback_errors[0]


class Reader:
    """Tails every partition from its current leader, recording what it reads. With
    ``truncation_allowed`` a partition whose log now ends below the reader's position (an
    unclean election) is read on from that end, as a consumer's auto.offset.reset=latest
    would, and counted in ``resets``; otherwise that is a failure."""

    def __init__(
        self,
        history: History,
        urls: list[str],
        api_key: str,
        topic: str,
        partitions: int,
        *,
        truncation_allowed: bool = False,
    ) -> None:
        self.truncation_allowed = truncation_allowed
        self.resets = 0
        self.history = history
        self.urls = urls
        self.api_key = api_key
        self.topic = topic
        self.positions = dict.fromkeys(range(partitions), 0)
        self.retries = 0
        self._stop = threading.Event()
        self._worker = Worker(f"fault-reader-{topic}", self._run)

    def start(self) -> Reader:
        self._worker.start()
        return self

    def _run(self) -> None:
        leaders: dict[int, str] = {}
        while not self._stop.is_set():
            if len(leaders) < len(self.positions):
                leaders = leader_urls(self.urls, self.api_key, self.topic)
            progressed = False
            for p, pos in self.positions.items():
                url = leaders.get(p)
                if not url:
                    continue
                try:
                    status, _, records = fetch(url, self.api_key, self.topic, p, pos)
                except (OSError, http.client.HTTPException):  # leader down or cut off
                    status, records = -1, []
                except OffsetOutOfRange as e:
                    if not self.truncation_allowed:
                        raise
                    self.positions[p] = e.log_end_offset
                    self.resets += 1
                    continue
                if status != 200:  # a retriable answer (fetch raises on any other)
                    self.retries += 1
                    leaders = {}
                    continue
                for offset, value in records:
                    self.history.read(p, offset, value)
                    self.positions[p] = offset + 1
                    progressed = True
            if not progressed:
                self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._worker.join(15)


def drain(
    history: History,
    urls: list[str],
    api_key: str,
    topic: str,
    partitions: int,
    *,
    timeout: float = 60.0,
) -> None:
    """Read every partition through its leader up to its high watermark into
    ``history.final`` (and the high watermark into ``history.high_watermarks``)."""
    deadline = time.monotonic() + timeout
    for p in range(partitions):
        records: list[tuple[int, str]] = []
        offset = 0
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"could not drain {topic}-{p} within {timeout} s")
            url = leader_urls(urls, api_key, topic).get(p)
            if not url:
                time.sleep(0.2)
                continue
            try:
                status, hw, got = fetch(url, api_key, topic, p, offset)
            except (OSError, http.client.HTTPException):
                time.sleep(0.2)
                continue
            if status != 200:
                time.sleep(0.2)
                continue
            records.extend(got)
            if got:
                offset = got[-1][0] + 1
            if offset >= hw:
                break
        history.final[p] = records
        history.high_watermarks[p] = hw


def read_replicas(
    history: History, directories: dict[int, dict[int, Path]], *, timeout: float = 30.0
) -> None:
    """Read every replica's segment files (``directories``: partition -> broker -> its
    partition directory) below the drained high watermark into ``history.replicas``.

    A follower may still be fetching the last records when the drain ends: each replica is
    re-read until it matches the leader below the HW or ``timeout`` passes; what it holds
    then is kept, and the checker counts any difference as divergent."""
    deadline = time.monotonic() + timeout
    for partition, replicas in directories.items():
        hw = history.high_watermarks[partition]
        leader = [(o, v) for o, v in history.final[partition] if o < hw]
        first = leader[0][0] if leader else hw
        history.replicas[partition] = {}
        for broker, directory in replicas.items():
            while True:
                held = [
                    (o, v.decode(errors="replace"))
                    for o, _, v in log_records(directory)
                    if first <= o < hw
                ]
                if held == leader or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            history.replicas[partition][broker] = held


class GroupReader:
    """A consumer-group member reading the topic and committing after every poll; it
    records what it read and every committed offset the coordinator acknowledged, and
    checks on every ``committed()`` lookup that no partition's committed offset is below
    one acknowledged earlier (committed offsets never move back).

    Retried (and counted): retriable errors, and a commit refused because a rebalance
    fenced the member (CommitFailedError: nothing was committed). Anything else stops the
    member and fails the scenario at ``stop``."""

    def __init__(self, history: History, urls: list[str], api_key: str, topic: str) -> None:
        self.history = history
        self.topic = topic
        self.consumer = GroupConsumer(
            ",".join(urls),
            api_key,
            group_id=f"faults-{topic}",
            topics=[topic],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=3000,
        )
        self.acked: dict[int, int] = {}  # partition -> highest acknowledged commit
        self.moved_back: list[tuple[int, int, int]] = []  # (partition, seen, floor)
        self.commits = 0
        self.retried: dict[str, int] = {}
        self._stop = threading.Event()
        self._worker = Worker(f"fault-group-{topic}", self._run)

    def start(self) -> GroupReader:
        self._worker.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except CommitFailedError as e:
                self._retry(e)
            except Exception as e:
                if not getattr(e, "retriable", False):
                    raise
                self._retry(e)

    def _retry(self, error: Exception) -> None:
        name = getattr(error, "error_code", type(error).__name__)
        self.retried[name] = self.retried.get(name, 0) + 1
        self._stop.wait(0.2)

    def _round(self) -> None:
        records = self.consumer.poll(0.5)
        for r in records:
            self.history.read(r.partition, r.offset, (r.value or b"").decode())
        if records:
            positions = {tp: self.consumer.position(tp) for tp in self.consumer.assignment()}
            self.consumer.commit()
            self.commits += 1
            for tp, offset in positions.items():
                if offset is not None:
                    self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), offset)
        floor = dict(self.acked)
        for tp, offset in self.consumer.committed().items():
            if offset < floor.get(tp.partition, -1):
                self.moved_back.append((tp.partition, offset, floor[tp.partition]))

    def stop(self) -> None:
        self._stop.set()
        try:
            self._worker.join(15)
        finally:
            self.consumer.close()
