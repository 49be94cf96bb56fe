"""Replica fetchers: followers pull from their leaders (Kafka's ``ReplicaFetcherThread``).

``ReplicaFetcherManager`` keeps one ``ReplicaFetcher`` per leader broker this broker follows;
a fetcher owns the HTTP session (its connection pool) to that leader and one loop per
followed partition, so a partition waiting in a long poll never holds up another. Each loop
drives the partition's ``FollowerState``:

1. **Truncating.** ``OffsetsForLeaderEpoch`` for the latest local epoch; truncate where the
   logs diverge (KIP-101), again with older epochs while the leader answers another epoch
   (KIP-279); restart the log empty at the leader's log start when the leader knows no
   epoch at or below ours. Never by the local high watermark.
2. **Fetching.** The leader's binary fetch with ``replica_id``, ``current_leader_epoch`` and
   ``broker_epoch`` from the log end offset; append the batches as they are (the leader's
   offsets and epochs), take the leader's high watermark. An answer is applied only while
   the log still ends at the offset it was fetched from, in the same truncation generation
   (Kafka's offset-mismatch check): a truncation while the fetch waits (the scrubber's
   repair) cancels it, and the next fetch starts from the new log end. The fetch offset is
   how the leader learns this replica's log end offset. OFFSET_OUT_OF_RANGE applies Kafka's
   ``handleOutOfRangeError``; FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
   NOT_LEADER_OR_FOLLOWER go back to truncating after a backoff (new metadata restarts the
   follower with the new leader and epoch).

Every request carries ``Authorization: Cluster <secret>``. A leader at a plain
``http://host:port`` URL is fetched from with the broker's lean HTTP/1.1 client
(``server/lean_client.py``: a follower makes one exchange per fetch, and aiohttp's client
costs about twice its CPU per exchange); any other URL (TLS) with aiohttp's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from urllib.parse import quote, urlencode

import aiohttp
import orjson

from brokernodes.replication import errors as codes
from brokernodes.replication.follower import FollowerPhase, out_of_range_decision
from brokernodes.server.lean_client import LeanClient, plain_http
from brokernodes.server.replica.partition import Partition

logger = logging.getLogger("sluice.broker.fetcher")

REPLICATION_BASE = "/internal/v1/replication/topics/{topic}/partitions/{partition}"
FETCH_PATH = "/sluice/v1/topics/{topic}/partitions/{partition}/batches"
KEEPALIVE_S = 30.0  # an idle connection to the leader is reused within this
MAX_CONNECTIONS = 256  # to one leader (fetches beyond wait for one)


class ReplicaFetchError(Exception):
    def __init__(self, code: str, message: str, details: dict | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.details = details or {}


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.session = aiohttp.ClientSession(
            headers={"Authorization": f"Cluster {manager.secret}"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=manager.connect_timeout_s),
        )
        # one fetch in flight per followed partition, each on a connection of its own: keep
        # as many idle as may be in flight, or a follower of many partitions reconnects
        self.lean = LeanClient(
            idle_s=KEEPALIVE_S,
            connect_timeout_s=manager.connect_timeout_s,
            max_idle=MAX_CONNECTIONS,
            max_per_peer=MAX_CONNECTIONS,
        )
        self._auth = (("Authorization", f"Cluster {manager.secret}"),)
        self.tasks: dict[tuple[str, int], asyncio.Task] = {}
        self.fenced_fetches = 0  # answers dropped because the log moved while they waited

    def add(self, p: Partition) -> None:
        key = (p.log.directory, p.partition)
        if key in self.tasks and not self.tasks[key].done():
            return
        self.tasks[key] = asyncio.create_task(
            self._run(p), name=f"replica-fetch-{p.topic}-{p.partition}<-{self.leader_id}"
        )

    async def remove(self, p: Partition) -> None:
        task = self.tasks.pop((p.log.directory, p.partition), None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self) -> None:
        tasks = list(self.tasks.values())
        self.tasks.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self.lean.close()
        await self.session.close()

    # --- one partition -----------------------------------------------------------------

    def _leader_url(self) -> str:
        url = self.manager.leader_url(self.leader_id)
        if not url:
            raise ReplicaFetchError("LEADER_NOT_AVAILABLE", f"no URL for broker {self.leader_id}")
        return url

    async def _run(self, p: Partition) -> None:
        backoff = self.manager.backoff_s
        while not p.closed:
            follower = p.follower
            if follower is None or follower.leader_id != self.leader_id:
                return  # the manager moves it to another fetcher (or it leads now)
            try:
                if follower.phase is FollowerPhase.TRUNCATING:
                    await self._truncate(p)
                else:
                    await self._fetch(p)
                backoff = self.manager.backoff_s
            except asyncio.CancelledError:
                raise
            except ReplicaFetchError as e:
                if e.code in (
                    codes.FENCED_LEADER_EPOCH,
                    codes.UNKNOWN_LEADER_EPOCH,
                    codes.NOT_LEADER_OR_FOLLOWER,
                ):
                    follower.on_fetch_error(e.code)
                logger.debug("%s-%d: replica fetch: %s", p.topic, p.partition, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.manager.max_backoff_s)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
                logger.debug(
                    "%s-%d: leader %d unreachable: %s", p.topic, p.partition, self.leader_id, e
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.manager.max_backoff_s)
            except Exception:
                logger.exception("%s-%d: replica fetcher failed", p.topic, p.partition)
                await asyncio.sleep(self.manager.max_backoff_s)

    async def _get(self, url: str, params: dict, timeout_s: float) -> tuple[int, dict, bytes]:
        plain = plain_http(url)
        if plain is not None:
            host, port, path = plain
            try:
                status, headers, body = await self.lean.request(
                    "GET",
                    host,
                    port,
                    f"{path}?{urlencode(params)}",
                    self._auth,
                    None,
                    read_timeout_s=timeout_s,
                )
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                # the leader closed or garbled the answer: as a lost connection
                raise ConnectionError(f"the leader's answer was cut short: {e}") from None
            return status, dict(headers), body
        async with self.session.get(
            url, params=params, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            return resp.status, dict(resp.headers), await resp.read()

    @staticmethod
    def _error(status: int, body: bytes) -> ReplicaFetchError:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        return ReplicaFetchError(
            str(doc.get("error_code") or f"HTTP_{status}"), str(doc.get("message") or ""), doc
        )

    async def _truncate(self, p: Partition) -> None:
        follower = p.follower
        assert follower is not None
        entries = p.log.leader_epoch_cache.entries
        request = follower.epoch_request(entries)
        if request is None:
            return  # an empty log: fetch at once
        url = (
            self._leader_url()
            + REPLICATION_BASE.format(topic=quote(p.info.topic, safe=""), partition=p.partition)
            + "/offsets-for-leader-epoch"
        )
        status, _, body = await self._get(
            url,
            {
                "replica_id": str(self.manager.broker_id),
                "current_leader_epoch": str(request.current_leader_epoch),
                "leader_epoch": str(request.requested_epoch),
            },
            self.manager.request_timeout_s,
        )
        if status != 200:
            raise self._error(status, body)
        doc = orjson.loads(body)
        error = str(doc.get("error_code", codes.NONE))
        decision = follower.on_epoch_response(
            error,
            int(doc.get("leader_epoch", -1)),
            int(doc.get("end_offset", -1)),
            entries,
            p.log.log_end_offset,
            int(doc.get("log_start_offset", 0)),
        )
        if decision is None:
            raise ReplicaFetchError(error, "OffsetsForLeaderEpoch refused")
        await self._apply(p, decision)
        logger.info(
            "%s-%d: following broker %d in epoch %d from offset %d (asked epoch %d, leader "
            "answered epoch %s ending at %s)",
            p.topic,
            p.partition,
            self.leader_id,
            follower.leader_epoch,
            p.log.log_end_offset,
            request.requested_epoch,
            doc.get("leader_epoch"),
            doc.get("end_offset"),
        )

    @staticmethod
    async def _apply(p: Partition, decision) -> None:
        if decision.start_at is not None:
            await asyncio.shield(p.truncate_fully_and_start_at(decision.start_at))
        elif decision.truncate_to is not None:
            await asyncio.shield(p.truncate_to(decision.truncate_to))

    async def _fetch(self, p: Partition) -> None:
        follower = p.follower
        assert follower is not None
        request = follower.fetch_request(p.log.log_end_offset)
        if request is None:
            return
        m = self.manager
        url = self._leader_url() + FETCH_PATH.format(
            topic=quote(p.info.topic, safe=""), partition=p.partition
        )
        generation = p.log_generation
        answer = await self._unless_truncated(
            p,
            self._get(
                url,
                {
                    "offset": str(request.fetch_offset),
                    "replica_id": str(m.broker_id),
                    "current_leader_epoch": str(request.current_leader_epoch),
                    "broker_epoch": str(m.broker_epoch()),
                    "max_wait_ms": str(m.max_wait_ms),
                    "max_bytes": str(m.max_bytes),
                },
                m.max_wait_ms / 1000 + m.request_timeout_s,
            ),
        )
        if answer is None:
            self.fenced_fetches += 1
            return  # the log was truncated (a repair) while the fetch waited: fetch again
        status, headers, body = answer
        if status != 200:
            error = self._error(status, body)
            if error.code == "OFFSET_OUT_OF_RANGE":
                leo = p.log.log_end_offset
                decision = out_of_range_decision(
                    leo,
                    int(error.details.get("log_start_offset", 0)),
                    int(error.details.get("log_end_offset", leo)),
                )
                logger.warning(
                    "%s-%d: fetch offset %d out of the leader's range %s: %s",
                    p.topic,
                    p.partition,
                    leo,
                    (error.details.get("log_start_offset"), error.details.get("log_end_offset")),
                    decision,
                )
                await self._apply(p, decision)
                return
            raise error
        if p.follower is not follower or follower.leader_epoch != request.current_leader_epoch:
            return  # the role changed while fetching: drop the answer
        # Applied only if the log still ends where it was fetched from (Kafka's fetcher
        # refuses an answer for another offset): a truncation meanwhile drops it.
        if not await asyncio.shield(p.append_as_follower(body, request.fetch_offset, generation)):
            self.fenced_fetches += 1
            logger.info(
                "%s-%d: dropped a fetch answer for offset %d: the log now ends at %d",
                p.topic,
                p.partition,
                request.fetch_offset,
                p.log.log_end_offset,
            )
            return
        hw = headers.get("Sluice-High-Watermark")
        if hw is not None:
            p.set_follower_high_watermark(int(hw))

    @staticmethod
    async def _unless_truncated(p: Partition, fetch) -> tuple[int, dict, bytes] | None:
        """The fetch's answer, or None (the fetch cancelled) once the log is truncated
        while it waits in the leader's long poll."""
        request = asyncio.ensure_future(fetch)
        truncated = asyncio.ensure_future(p.wait_for_truncation())
        try:
            await asyncio.wait((request, truncated), return_when=asyncio.FIRST_COMPLETED)
        finally:
            truncated.cancel()
            if not request.done():
                request.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await request
            elif not request.cancelled():
                # failed as this fetch was being cancelled: the failure is the cancelled
                # fetch's, not one for asyncio to log as never retrieved
                request.exception()
        if request.cancelled():
            return None
        return request.result()


class ReplicaFetcherManager:
    """One ``ReplicaFetcher`` per leader broker; partitions move between them as their
    leaders change (``follow``) and leave them when led here or dropped (``unfollow``)."""

    def __init__(
        self,
        *,
        broker_id: int,
        secret: str,
        leader_url: Callable[[int], str | None],
        broker_epoch: Callable[[], int],
        max_wait_ms: int = 500,
        max_bytes: int = 1024 * 1024,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
        request_timeout_s: float = 10.0,
        connect_timeout_s: float = 2.0,
    ) -> None:
        self.broker_id = broker_id
        self.secret = secret
        self.leader_url = leader_url
        self.broker_epoch = broker_epoch
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}  # partition -> leader id

    async def follow(self, p: Partition) -> None:
        """(Re)start fetching ``p`` from its current leader."""
        follower = p.follower
        if follower is None or follower.leader_id is None:
            await self.unfollow(p)
            return
        leader = follower.leader_id
        key = (p.log.directory, p.partition)
        old = self._following.get(key)
        if old is not None and old != leader:
            await self.fetchers[old].remove(p)
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(self, leader)
        self._following[key] = leader
        fetcher.add(p)

    async def unfollow(self, p: Partition) -> None:
        old = self._following.pop((p.log.directory, p.partition), None)
        if old is not None and old in self.fetchers:
            await self.fetchers[old].remove(p)

    def followed(self) -> int:
        return len(self._following)

    async def close(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._following.clear()
        for f in fetchers:
            await f.close()
