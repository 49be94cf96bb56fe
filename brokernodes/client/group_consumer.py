"""``AsyncGroupConsumer`` / ``GroupConsumer``: consumer-group membership (KIP-848 style) over
the broker's group API, on top of ``AsyncConsumer`` for fetching.

A background task heartbeats to the group's coordinator (found with ``GET
/sluice/v1/groups/{g}/coordinator``; NOT_COORDINATOR answers name the right broker) with the
member id, member epoch, subscriptions and the partitions the member owns; the answer is the
partitions it may consume. Changes to the assignment are applied inside ``poll`` (as Kafka
runs rebalance callbacks inside ``poll``), so a callback never races the caller's processing:

- revoked partitions: with auto-commit, the positions of what ``poll`` returned so far are
  committed first, then ``on_partitions_revoked(partitions)`` runs, fetching stops, and the
  next heartbeat reports them released;
- assigned partitions: positions start at the committed offsets (``auto_offset_reset`` where
  there are none), then ``on_partitions_assigned(partitions)`` runs.

At-least-once: auto-commit (every ``auto_commit_interval_ms``, at revocation and at close)
commits the position after the last record an *earlier* ``poll`` returned, which the caller
has processed by the time it polls again. A fenced member (FENCED_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID) loses its partitions without committing and rejoins.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from brokernodes.client._loop import LoopThread
from brokernodes.client.consumer import AsyncConsumer, ConsumerRecord
from brokernodes.client.http import HttpTransport
from brokernodes.client.metadata import TopicPartition, bootstrap_urls
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientClosedError,
    ClientTimeoutError,
    SluiceError,
)

__all__ = ["AsyncGroupAdmin", "AsyncGroupConsumer", "CommitFailedError", "GroupConsumer"]

log = logging.getLogger("brokernodes.client.group_consumer")

_FENCED = frozenset({"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"})
_COORDINATOR_MOVED = frozenset(
    {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"}
)

Listener = Callable[[set[TopicPartition]], Any]
# heartbeat this much more often while partitions are pending, and once after the
# assignment changed: changes come in bursts (members starting or stopping together), and
# the next one is learnt on a heartbeat
PENDING_SPEEDUP = 5


class CommitFailedError(SluiceError):
    """The commit was refused: this member is no longer in the group at that epoch (a
    rebalance fenced it), so another member may already own the partitions."""

    error_code = "COMMIT_FAILED"


def _tp_list(tps: Iterable[TopicPartition]) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p} for t, p in sorted(tps)]


def _tps(rows: Iterable[dict]) -> set[TopicPartition]:
    return {TopicPartition(r["topic"], int(r["partition"])) for r in rows}


class AsyncGroupConsumer:
    """``async with AsyncGroupConsumer(url, key, group_id="g") as c: c.subscribe(["t"])``."""

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        group_id: str,
        topics: Iterable[str] = (),
        group_instance_id: str | None = None,
        client_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
        on_partitions_revoked: Listener | None = None,
        on_partitions_assigned: Listener | None = None,
        auto_offset_reset: str = "latest",
        request_timeout_ms: float = 30_000,
        **consumer_config: Any,
    ) -> None:
        if not group_id:
            raise ValueError("group_id is required")
        self.group_id = group_id
        self._urls = bootstrap_urls(url)
        self.instance_id = group_instance_id
        self.client_id = client_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.assignor = assignor
        self.on_partitions_revoked = on_partitions_revoked
        self.on_partitions_assigned = on_partitions_assigned
        self._consumer = AsyncConsumer(
            url,
            api_key,
            auto_offset_reset=auto_offset_reset,
            request_timeout_ms=request_timeout_ms,
            **consumer_config,
        )
        # The coordinator's requests (heartbeat, commit, offset fetch) have slots of their
        # own: the fetcher keeps a long poll open per partition, and a heartbeat or a
        # revocation's commit queued behind them would wait for a long poll to end. They
        # share the consumer's pool of connections (an idle one serves either).
        self._transport = HttpTransport(
            api_key,
            max_connections_per_host=8,
            request_timeout_s=request_timeout_ms / 1000 + 1,
            share=self._consumer._transport,
        )
        self._subscriptions: list[str] = sorted(set(topics))
        self._send_subscriptions = True
        self.member_id: str | None = None
        self.member_epoch = 0
        self._interval_s = (heartbeat_interval_ms or 3000) / 1000
        self._coordinator: str | None = None
        self._target: set[TopicPartition] = set()
        self._owned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._lost = False
        self._pending = False
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._hb_task: asyncio.Task | None = None
        self._hb_sent = 0  # heartbeats sent; the one whose answer was applied last:
        self._hb_applied = 0
        self._last_commit = time.monotonic()
        self._started = False
        self._closed = False
        self.last_error: BaseException | None = None

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        await self._consumer.start()
        self._started = True
        if self._subscriptions:
            self._start_heartbeats()

    async def __aenter__(self) -> AsyncGroupConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join (or change the subscription of) the group; the coordinator assigns."""
        self._check_open()
        topics = sorted(set(topics))
        if topics != self._subscriptions:
            self._subscriptions = topics
            self._send_subscriptions = True
            self._wake.set()
        self._start_heartbeats()

    def subscription(self) -> list[str]:
        return list(self._subscriptions)

    def assignment(self) -> set[TopicPartition]:
        return set(self._owned)

    async def close(self, *, leave: bool = True) -> None:
        """Commit (with auto-commit) and leave the group (a static member leaves
        temporarily, keeping its partitions for its session timeout). ``leave=False`` stops
        without a word, as a crash would (tests)."""
        if self._closed:
            return
        if leave and self._started and self.enable_auto_commit and self._owned:
            with contextlib.suppress(SluiceError):
                await self._commit(self._positions_of(self._owned))
        self._closed = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._hb_task
        if leave and self.member_id and self.member_epoch > 0:
            epoch = -2 if self.instance_id else -1
            with contextlib.suppress(SluiceError):
                await self._post(
                    "heartbeat",
                    {
                        "member_id": self.member_id,
                        "member_epoch": epoch,
                        "instance_id": self.instance_id,
                    },
                )
        await self._consumer.close()
        await self._transport.close()

    # --- poll and commit ------------------------------------------------------------------

    async def poll(
        self, timeout: float = 1.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records of the assigned partitions; applies assignment changes first (running
        the rebalance callbacks), and auto-commits what earlier polls returned."""
        self._check_open()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            # cleared first: a change that comes while this one is applied ends the wait
            self._changed.clear()
            await self._maybe_auto_commit()
            await self._apply_assignment()
            remaining = deadline - time.monotonic()
            wait = min(max(remaining, 0.0), self._interval_s)
            records = await self._poll_or_change(wait, max_records)
            if records:
                # where the consumer stands now: after the last record of each partition
                # this poll returned (the owned partitions' positions, a few per poll, not
                # one update per record)
                self._positions.update(self._consumer.positions(self._owned))
                return records
            if time.monotonic() >= deadline:
                return []

    async def maintain(self, timeout: float, wake: asyncio.Event | None = None) -> None:
        """Apply assignment changes (rebalance callbacks, auto-commit) without taking
        records, for a caller that is not polling now (a stream out of credit): waits up to
        ``timeout`` for a change, or until ``wake`` is set."""
        self._check_open()
        self._changed.clear()
        await self._maybe_auto_commit()
        await self._apply_assignment()
        waits = [asyncio.ensure_future(self._changed.wait())]
        if wake is not None:
            waits.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        await self._apply_assignment()

    async def _poll_or_change(self, wait: float, max_records: int | None) -> list:
        """The consumer's poll, cut short when the assignment changes."""
        # Records at hand are taken without the tasks below (the steady state of a busy
        # consumer: a poll per few hundred records), after one turn of the event loop so
        # that heartbeats and fetches run between polls; a cancellation there takes nothing.
        await asyncio.sleep(0)
        consumer = self._consumer
        records = consumer._take(max_records or consumer.max_poll_records)
        if records:
            return records
        poll = asyncio.ensure_future(self._consumer.poll(wait, max_records))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait((poll, changed), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            poll.cancel()  # the caller was cancelled: the poll must not run on alone
            raise
        finally:
            changed.cancel()
        if poll.done():
            return poll.result()
        poll.cancel()  # safe: the consumer takes records only when it returns them
        try:
            return await poll
        except asyncio.CancelledError:
            # the inner poll's cancellation ends in an empty answer; the caller's own
            # cancellation (arriving while it waits here) must go on, never be swallowed
            task = asyncio.current_task()
            if self._closed or (task is not None and task.cancelling()):
                raise
            return []

    async def commit(self, offsets: dict | None = None) -> None:
        """Commit ``offsets`` ({tp: next offset}) or the positions of everything ``poll``
        returned; raises ``CommitFailedError`` when the member was fenced."""
        self._check_open()
        wanted = offsets if offsets is not None else self._positions_of(self._owned)
        await self._commit({TopicPartition(*tp): int(o) for tp, o in wanted.items()})

    def commit_async(
        self,
        offsets: dict | None = None,
        callback: Callable[[dict, BaseException | None], Any] | None = None,
    ) -> asyncio.Task:
        """Commit in the background; ``callback(offsets, error)`` runs when it is done."""
        wanted = offsets if offsets is not None else self._positions_of(self._owned)
        wanted = {TopicPartition(*tp): int(o) for tp, o in wanted.items()}

        async def run() -> None:
            error = None
            try:
                await self._commit(wanted)
            except SluiceError as e:
                error = e
            if callback is not None:
                callback(wanted, error)

        return asyncio.get_running_loop().create_task(run())

    async def committed(self, partitions: Iterable[TopicPartition] | None = None) -> dict:
        """The group's committed offsets ({tp: offset})."""
        doc = await self._get("offsets")
        found = {
            TopicPartition(r["topic"], int(r["partition"])): int(r["offset"])
            for r in doc.get("offsets", [])
        }
        if partitions is None:
            return found
        wanted = {TopicPartition(*tp) for tp in partitions}
        return {tp: o for tp, o in found.items() if tp in wanted}

    def position(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        return self._positions.get(TopicPartition(*partition))

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Consume an owned partition from ``offset`` on (the next commit stores it)."""
        tp = TopicPartition(*partition)
        if tp not in self._owned:
            raise SluiceError(f"partition {tp.topic}-{tp.partition} is not assigned to this member")
        self._consumer.seek(tp, offset)
        self._positions[tp] = offset

    async def seek_to(self, spec: str, partitions: Iterable) -> None:
        """``spec`` "earliest" or "latest" for owned ``partitions`` (all when empty)."""
        tps = [TopicPartition(*tp) for tp in partitions] or sorted(self._owned)
        found = (
            await self._consumer.beginning_offsets(tps)
            if spec == "earliest"
            else await self._consumer.end_offsets(tps)
        )
        for tp, offset in found.items():
            self.seek(tp, offset)

    # --- internals: assignment ------------------------------------------------------------

    def _positions_of(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: self._positions[tp]
            for tp in tps
            if tp in self._positions and self._positions[tp] != self._committed.get(tp)
        }

    async def _maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit or not self._owned:
            return
        if time.monotonic() - self._last_commit < self.auto_commit_interval_s:
            return
        self._last_commit = time.monotonic()
        try:
            await self._commit(self._positions_of(self._owned))
        except SluiceError as e:
            log.info("group %s: auto-commit failed: %s", self.group_id, e)

    async def _apply_assignment(self) -> None:
        # until the member holds its target: the target may change while the positions of
        # new partitions are looked up (the heartbeat reporting them owned goes out first)
        while True:
            if self._lost:
                self._lost = False
                lost = set(self._owned)
                self._drop(lost)
                if lost:
                    await self._call(self.on_partitions_revoked, lost)
            revoked = self._owned - self._target
            if revoked:
                if self.enable_auto_commit:
                    try:
                        await self._commit(self._positions_of(revoked))
                    except SluiceError as e:
                        log.info("group %s: commit before revoking failed: %s", self.group_id, e)
                await self._call(self.on_partitions_revoked, revoked)
                self._drop(revoked)
                self._wake.set()
            added = self._target - self._owned
            if not added:
                return
            await self._take_partitions(added)
            if self._owned == self._target and not self._lost:
                return

    async def _take_partitions(self, added: set[TopicPartition]) -> None:
        """Own ``added`` from now on and fetch them once every position is known.

        A heartbeat reporting them owned (so a revocation of them waits for this member)
        goes out with the committed offsets' lookup, and its answer is awaited: assignments
        change in bursts (members starting together), and a partition the target has lost by
        then is released at once, neither reset nor fetched nor handed to the listeners. The
        first member of a group starting together would otherwise look up and fetch every
        partition, to give most of them away a moment later."""
        self._owned |= added
        try:
            heard, found = await asyncio.gather(
                self._heartbeat(), self.committed(added), return_exceptions=True
            )
            if isinstance(found, BaseException):
                raise found
            if isinstance(heard, SluiceError):  # the heartbeat task retries (or rejoins)
                log.info("group %s: heartbeat after an assignment failed: %s", self.group_id, heard)
            elif isinstance(heard, BaseException):
                raise heard
            lost = added - self._target
            if lost:
                # taken back already: released at once (the heartbeat this wakes says so,
                # while the rest are looked up), never handed to the caller
                self._owned -= lost
                added = added - lost
                self._wake.set()
            wanted = set(added)
            committed = {tp: o for tp, o in found.items() if tp in wanted}
            fresh = sorted(tp for tp in wanted if tp not in committed)
            # no committed offset: auto_offset_reset, resolved now (all at once, before
            # their fetch tasks start) so the position is committed and the next owner
            # starts there too
            reset = await self._consumer.reset_offsets(fresh)
        except BaseException:
            self._owned -= added  # not taken: the next poll tries again
            self._wake.set()
            raise
        fetched = self._owned & self._target
        self._consumer.assign(sorted(fetched))
        for tp in sorted(wanted):
            if tp in committed:
                self._positions[tp] = self._committed[tp] = committed[tp]
            else:
                self._positions[tp] = reset[tp]
            if tp in fetched:
                self._consumer.seek(tp, self._positions[tp])
        if added:
            await self._call(self.on_partitions_assigned, added)
        self._wake.set()

    def _drop(self, tps: set[TopicPartition]) -> None:
        self._owned -= tps
        for tp in tps:
            self._positions.pop(tp, None)
            self._committed.pop(tp, None)
        self._consumer.assign(sorted(self._owned))

    @staticmethod
    async def _call(listener: Listener | None, tps: set[TopicPartition]) -> None:
        if listener is None:
            return
        result = listener(set(tps))
        if inspect.isawaitable(result):
            await result

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        body = {
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": o}
                for tp, o in sorted(offsets.items())
            ]
        }
        for attempt in range(2):
            body["member_id"] = self.member_id
            body["member_epoch"] = self.member_epoch
            try:
                await self._post("offsets", body)
                break
            except BrokerError as e:
                if e.error_code == "STALE_MEMBER_EPOCH" and attempt == 0:
                    await self._heartbeat()  # maybe we missed an epoch bump
                    continue
                if e.error_code in ("STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
                    raise CommitFailedError(
                        f"commit refused ({e.error_code}): this member no longer owns these "
                        "partitions at this epoch; they may have moved to another member"
                    ) from e
                raise
        for tp, o in offsets.items():
            self._committed[tp] = o

    # --- internals: coordinator requests --------------------------------------------------

    def _group_path(self, what: str) -> str:
        return f"/sluice/v1/groups/{quote(self.group_id, safe='')}/{what}".rstrip("/")

    async def _find_coordinator(self) -> str:
        error: BaseException | None = None
        urls = list(self._urls)
        metadata = self._consumer.metadata
        if metadata is not None:
            urls += [u for u in metadata.brokers.values() if u not in urls]
        for url in urls:
            try:
                doc = await self._transport.get_json(url + self._group_path("coordinator"))
            except (BrokerConnectionError, ClientTimeoutError, BrokerError) as e:
                error = e
                continue
            if doc.get("url"):
                self._coordinator = str(doc["url"]).rstrip("/")
                return self._coordinator
        raise error or BrokerError("COORDINATOR_NOT_AVAILABLE", "no coordinator is known")

    async def _request(self, method: str, what: str, body: dict | None = None) -> dict:
        """A request to the group's coordinator. With none known yet the first attempt goes to
        the first bootstrap broker, which is the coordinator or names it (NOT_COORDINATOR
        with its URL, followed at once): on one broker, or by luck, the lookup costs no round
        trip of its own. Later attempts look it up (``_find_coordinator``) and back off."""
        attempt = 0
        while True:
            attempt += 1
            try:
                url = self._coordinator
                if url is None:
                    url = self._urls[0] if attempt == 1 else await self._find_coordinator()
                resp = await self._transport.request(
                    method, url + self._group_path(what), json=body
                )
                if self._coordinator is None:
                    self._coordinator = url
                return resp.json()
            except BrokerError as e:
                if e.error_code not in _COORDINATOR_MOVED or attempt >= 20:
                    raise
                moved = e.details.get("coordinator_url")
                self._coordinator = str(moved).rstrip("/") if moved else None
                if moved and attempt == 1:
                    continue  # told where it is: no need to wait
            except (BrokerConnectionError, ClientTimeoutError):
                guessed = self._coordinator is None and attempt == 1
                self._coordinator = None
                if attempt >= 20 or self._closed:
                    raise
                if guessed:
                    continue  # the first bootstrap broker is down: look it up from the others
            await asyncio.sleep(min(1.0, 0.05 * 2 ** min(attempt, 5)) * random.uniform(0.8, 1.2))

    async def _post(self, what: str, body: dict) -> dict:
        return await self._request("POST", what, body)

    async def _get(self, what: str) -> dict:
        return await self._request("GET", what)

    # --- internals: heartbeats --------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._started and (self._hb_task is None or self._hb_task.done()):
            self._hb_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"sluice-group-{self.group_id}"
            )

    async def _heartbeat(self, wait_ms: int = 0) -> None:
        """One heartbeat; ``wait_ms``: a waiting one (the coordinator holds it until this
        member has news or the wait ends). An answer to a heartbeat sent before the one
        whose answer was applied last is stale and left out (the commit's heartbeat may
        overtake a held one)."""
        self._hb_sent += 1
        seq = self._hb_sent
        body: dict[str, Any] = {
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "owned": _tp_list(self._owned),
        }
        if wait_ms > 0:
            body["wait_ms"] = wait_ms
        if self.instance_id:
            body["instance_id"] = self.instance_id
        if self.member_epoch == 0 or self._send_subscriptions:
            body["subscriptions"] = self._subscriptions
            body["client_id"] = self.client_id
            for name in ("session_timeout_ms", "heartbeat_interval_ms", "rebalance_timeout_ms"):
                if getattr(self, name) is not None:
                    body[name] = getattr(self, name)
            if self.assignor:
                body["assignor"] = self.assignor
        sent_subscriptions = "subscriptions" in body
        try:
            doc = await self._post("heartbeat", body)
        except BrokerError:
            if seq < self._hb_applied:
                return  # a later heartbeat was answered: this one's error is stale too
            raise
        if seq < self._hb_applied:
            return
        self._hb_applied = seq
        if sent_subscriptions:
            self._send_subscriptions = False
        self.member_id = doc["member_id"]
        self.member_epoch = int(doc["member_epoch"])
        self._interval_s = max(0.01, int(doc["heartbeat_interval_ms"]) / 1000)
        # partitions promised once their owners release them, or a new assignment (more
        # changes may follow it): ask again sooner than usual
        target = _tps(doc["assignment"])
        self._pending = bool(doc.get("pending")) or target != self._target
        if target != self._target or target != self._owned:
            self._target = target
            self._changed.set()

    def _settled(self) -> bool:
        """Joined, the subscription sent, and holding exactly the partitions the last answer
        gave: nothing to tell the coordinator, so the heartbeat may wait for news."""
        return (
            self.member_epoch > 0
            and not self._send_subscriptions
            and not self._lost
            and self._owned == self._target
        )

    async def _waiting_heartbeat(self, wait_ms: int) -> None:
        """A heartbeat the coordinator may hold up to ``wait_ms`` until there is news for this
        member; abandoned (its connection closed) when the member has something to say
        first (``_wake``: a subscription change, partitions released)."""
        heartbeat = asyncio.ensure_future(self._heartbeat(wait_ms))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((heartbeat, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not heartbeat.done():
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
        if not heartbeat.cancelled():
            heartbeat.result()

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            # cleared before the heartbeat: a wake while it is out is not lost
            self._wake.clear()
            wait_ms = 0
            if self._settled():
                wait_ms = int(min(self._interval_s, self._transport.request_timeout_s / 2) * 1000)
            sent = time.monotonic()
            try:
                if wait_ms:
                    await self._waiting_heartbeat(wait_ms)
                else:
                    await self._heartbeat()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except BrokerError as e:
                self.last_error = e
                if e.error_code in _FENCED:
                    log.info("group %s: fenced (%s); rejoining", self.group_id, e.error_code)
                    self.member_epoch = 0
                    self._target = set()
                    self._lost = True
                    self._changed.set()
                    continue
                log.warning("group %s: heartbeat failed: %s", self.group_id, e)
            except SluiceError as e:
                self.last_error = e
                log.info("group %s: heartbeat failed: %s", self.group_id, e)
            wait = self._interval_s / PENDING_SPEEDUP if self._pending else self._interval_s
            if self._settled():
                # nothing to apply: the next heartbeat waits for news at the broker. A held
                # one waited out (part of) the interval already; a broker that does not hold
                # heartbeats answers at once, and the member waits as before
                wait = wait - (time.monotonic() - sent) if wait_ms else 0
            # else: news to apply; ``poll`` wakes this loop once it has (a heartbeat before
            # that would have nothing new to say)
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the group consumer is closed")
        if not self._started:
            raise SluiceError("the group consumer is not started: await start() first")


class GroupConsumer:
    """Blocking group consumer: ``AsyncGroupConsumer`` on a private event loop thread.
    Rebalance callbacks run on that thread, inside ``poll``."""

    def __init__(self, url: str | list[str], api_key: str | None = None, **config: Any) -> None:
        self._thread = LoopThread("sluice-group-consumer")
        self._timeout = config.get("request_timeout_ms", 30_000) / 1000 + 30
        try:

            async def create() -> AsyncGroupConsumer:
                c = AsyncGroupConsumer(url, api_key, **config)
                await c.start()
                return c

            self._c = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def member_id(self) -> str | None:
        return self._c.member_id

    @property
    def member_epoch(self) -> int:
        return self._c.member_epoch

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._thread.run(coro, timeout or self._timeout)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def subscribe(self, topics: Iterable[str]) -> None:
        self._run(self._call(self._c.subscribe, list(topics)))

    def assignment(self) -> set[TopicPartition]:
        return self._c.assignment()

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._run(self._c.poll(timeout, max_records), timeout + self._timeout)

    def commit(self, offsets: dict | None = None) -> None:
        self._run(self._c.commit(offsets))

    def commit_async(self, offsets: dict | None = None, callback: Any = None) -> None:
        self._run(self._call(self._c.commit_async, offsets, callback))

    def committed(self, partitions: Iterable[TopicPartition] | None = None) -> dict:
        return self._run(self._c.committed(partitions))

    def position(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        return self._c.position(partition)

    def close(self, *, leave: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._c.close(leave=leave), 30)
        finally:
            self._thread.stop()


class AsyncGroupAdmin:
    """Group administration over the brokers' group API: list (every broker's groups),
    describe with lag, reset offsets (dry run by default) and delete. Requests for one group
    go to its coordinator (NOT_COORDINATOR answers name it)."""

    def __init__(self, url: str | list[str], api_key: str | None = None, **kw: Any) -> None:
        self._urls = bootstrap_urls(url)
        self._transport = HttpTransport(api_key, request_timeout_s=kw.get("timeout_s", 30.0))

    async def __aenter__(self) -> AsyncGroupAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._transport.close()

    async def _brokers(self) -> list[str]:
        from brokernodes.client.metadata import fetch_metadata

        metadata = await fetch_metadata(self._transport, self._urls)
        return sorted(set(metadata.brokers.values())) or list(self._urls)

    async def list_groups(self) -> list[dict]:
        """Every group of the caller's tenant, from every broker (each lists those it
        coordinates)."""
        rows: dict[str, dict] = {}
        for url in await self._brokers():
            with contextlib.suppress(BrokerConnectionError, ClientTimeoutError):
                doc = await self._transport.get_json(url + "/sluice/v1/groups")
                for g in doc.get("groups", []):
                    rows[g["group_id"]] = g
        return [rows[k] for k in sorted(rows)]

    async def _group(self, method: str, group_id: str, suffix: str = "", body=None) -> dict:
        path = f"/sluice/v1/groups/{quote(group_id, safe='')}{suffix}"
        url = self._urls[0]
        for _ in range(3):
            try:
                resp = await self._transport.request(method, url + path, json=body)
                return resp.json()
            except BrokerError as e:
                moved = e.details.get("coordinator_url")
                if e.error_code != "NOT_COORDINATOR" or not moved:
                    raise
                url = str(moved).rstrip("/")
        raise BrokerError("NOT_COORDINATOR", "the coordinator kept moving; retry")

    async def describe_group(self, group_id: str) -> dict:
        return await self._group("GET", group_id)

    async def delete_group(self, group_id: str) -> None:
        await self._group("DELETE", group_id)

    async def reset_offsets(
        self,
        group_id: str,
        topic: str,
        strategy: str,
        value: Any = None,
        *,
        partitions: list[int] | None = None,
        dry_run: bool = True,
    ) -> dict:
        """``strategy``: earliest, latest, offset, datetime, shift-by, by-duration; the
        answer's ``plan`` lists per partition current, target and delta."""
        body = {
            "topic": topic,
            "partitions": partitions,
            "strategy": strategy,
            "value": value,
            "dry_run": dry_run,
        }
        return await self._group("POST", group_id, "/reset-offsets", body)
