"""Steady load for fault scenarios: an idempotent acks=all SDK producer, a tailing reader,
and the final drain. Every wait is bounded; everything records into a ``History``."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import quote

from brokernodes.client.group_consumer import GroupConsumer
from brokernodes.client.producer import Producer
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import iter_batches
from tests.faults.history import History


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


def fetch(url: str, api_key: str, topic: str, partition: int, offset: int):
    """(status, high watermark, [(offset, value)]) from one binary fetch."""
    path = (
        f"{url}/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}/batches"
        f"?offset={offset}&max_bytes=1048576"
    )
    status, headers, body = _get(path, api_key)
    if status != 200:
        return status, -1, []
    out = []
    for h in iter_batches(body):
        for r in decode_batch(body, h.position).records:
            if r.offset >= offset:
                out.append((r.offset, (r.value or b"").decode()))
    return status, int(headers.get("Sluice-High-Watermark", -1)), out


class LoadProducer:
    """Sends unique values at a steady rate from a thread until ``stop``."""

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
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=50,
            retry_backoff_max_ms=500,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-load", daemon=True)
        self.sent = 0

    def start(self) -> LoadProducer:
        self._thread.start()
        return self

    def _callback(self, value: str):
        def done(fut) -> None:
            error = fut.exception(0)
            if error is not None:
                self.history.fail(value, error)
            else:
                md = fut.result(0)
                self.history.ack(value, md.partition, md.offset)

        return done

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        i = 0
        while not self._stop.is_set():
            value = f"{self.prefix}-{i}"
            i += 1
            self.history.attempt(value)
            try:
                fut = self.producer.send(self.topic, value.encode(), key=value.encode())
            except Exception as e:  # buffer full etc.: an attempt that failed at once
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
        self._stop.set()
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self.producer.flush(flush_timeout)
        with contextlib.suppress(Exception):
            self.producer.close(10)


class Reader:
    """Tails every partition from its current leader, recording what it reads."""

    def __init__(
        self, history: History, urls: list[str], api_key: str, topic: str, partitions: int
    ) -> None:
        self.history = history
        self.urls = urls
        self.api_key = api_key
        self.topic = topic
        self.positions = dict.fromkeys(range(partitions), 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
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
                except OSError:
                    leaders = {}
                    continue
                if status != 200:
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
        self._thread.join(10)


def drain(
    history: History,
    urls: list[str],
    api_key: str,
    topic: str,
    partitions: int,
    *,
    timeout: float = 60.0,
) -> None:
    """Read every partition from its leader up to its high watermark into ``history.final``."""
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
            except OSError:
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


class GroupReader:
    """A consumer-group member reading the topic and committing after every poll; it
    records what it read and every committed offset the coordinator acknowledged, and
    checks on every ``committed()`` lookup that no partition's committed offset is below
    one acknowledged earlier (committed offsets never move back)."""

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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-group", daemon=True)

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                records = self.consumer.poll(0.5)
                for r in records:
                    self.history.read(r.partition, r.offset, (r.value or b"").decode())
                if records:
                    positions = {
                        tp: self.consumer.position(tp) for tp in self.consumer.assignment()
                    }
                    self.consumer.commit()
                    self.commits += 1
                    for tp, offset in positions.items():
                        if offset is not None:
                            self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), offset)
                floor = dict(self.acked)
                for tp, offset in self.consumer.committed().items():
                    if offset < floor.get(tp.partition, -1):
                        self.moved_back.append((tp.partition, offset, floor[tp.partition]))
            except Exception:  # failover: the next round retries
                self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        with contextlib.suppress(Exception):
            self.consumer.close()
