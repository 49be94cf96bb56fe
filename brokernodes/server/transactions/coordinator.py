"""``TransactionCoordinator``: the broker's shell around the transaction state machine.

Each ``__transaction_state`` partition this broker leads is a shard: the transactional ids of
that partition, rebuilt from its records when the broker becomes the leader. A request for an
id runs under its shard's lock: apply the pure function, append the new metadata with
acks=all, then keep it and answer. Ending a transaction appends ``PrepareCommit`` or
``PrepareAbort`` first; a completion task then writes the markers to every partition of the
transaction (``MarkerWriter``, retried until each is written) and appends ``CompleteCommit``
or ``CompleteAbort``. A coordinator that loads a shard resumes the completion of every
transaction it finds prepared, so a failover between the two appends loses nothing: the
prepared decision is durable, and the markers are written again (a second marker ends
nothing on a partition whose transaction the first one ended, as in Kafka).

A timer aborts transactions older than their ``transaction.timeout.ms``, bumping the epoch
so the stuck producer is fenced, and forgets ids idle for ``transactional.id.expiration.ms``
(``SLUICE_TRANSACTIONAL_ID_EXPIRATION_MS``, default 7 days) with a tombstone. A request for
an id another broker coordinates answers NOT_COORDINATOR; one that arrives while the shard
loads, COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brokernodes.server.coordinator.group_coordinator import (
    Coordinator,
    CoordinatorNotAvailableError,
    loaded_shard,
    locate,
)
from brokernodes.server.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    append_records,
    offsets_topic,
    read_records,
    unqualify,
)
from brokernodes.server.transactions.markers import MarkerWriter
from brokernodes.server.transactions.topic import partition_for, txn_topic
from brokernodes.transactions import records as txn_records
from brokernodes.transactions import state as txn
from brokernodes.transactions.state import TxnError, TxnMetadata, TxnState

if TYPE_CHECKING:
    from brokernodes.server.coordinator.group_coordinator import GroupCoordinator
    from brokernodes.server.metadata.cluster import ClusterMetadata, MetadataSource
    from brokernodes.server.replica.manager import ReplicaManager
    from brokernodes.server.replica.partition import Partition

logger = logging.getLogger("sluice.broker.transactions")

TIMER_INTERVAL_S = 0.5
END_TXN_WAIT_S = 10.0  # EndTxn answers once the markers are written, or after this
INIT_WAIT_S = 5.0  # InitProducerId waits this long for the previous instance's abort
RETRY_MAX_S = 2.0
MAX_VERIFIED = 100_000  # remembered produce verifications (a cache, cleared when full)
ID_EXPIRATION_MS = int(
    os.environ.get("SLUICE_TRANSACTIONAL_ID_EXPIRATION_MS", str(txn.ID_EXPIRATION_MS))
)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TxnShard:
    """One led ``__transaction_state`` partition's transactional ids."""

    partition: int
    leader_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    failed: bool = False
    completing: dict[str, asyncio.Task] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(
        self,
        metadata: MetadataSource,
        replicas: ReplicaManager,
        groups: GroupCoordinator,
        allocate_producer_id: Callable[[], Awaitable[tuple[int, int]]],
        cluster_secret: str = "",
    ) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.groups = groups
        self.allocate_producer_id = allocate_producer_id
        self.markers = MarkerWriter(metadata, replicas, groups, cluster_secret)
        self.markers.on_written = self.forget_verified
        self.shards: dict[int, TxnShard] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timer_task: asyncio.Task | None = None
        # ((qualified id, producer id, epoch), (topic, partition)) verified for produce ->
        # the partition's leader epoch then
        self.verified: dict[tuple[tuple[str, int, int], tuple[str, int]], int] = {}

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.on_metadata(self.metadata.global_image())
        self.metadata.add_listener(self.on_metadata)
        self._timer_task = asyncio.create_task(self._timer(), name="sluice-txn-timer")

    async def close(self) -> None:
        tasks = [*self._tasks, *([self._timer_task] if self._timer_task else [])]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self.markers.close()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _partition(self, number: int) -> Partition | None:
        topic = txn_topic(self.metadata.global_image())
        if topic is None or number >= len(topic.partitions):
            return None
        info = topic.partitions[number]
        return self.replicas.partitions.get((info.log_key, number))

    async def on_metadata(self, image: ClusterMetadata) -> None:
        """Load shards for newly led partitions; drop those led elsewhere now."""
        image = image.root or image
        topic = txn_topic(image)
        led = {}
        if topic is not None:
            led = {
                p.partition: p.leader_epoch for p in topic.partitions if p.leader == image.broker_id
            }
        for number, shard in list(self.shards.items()):
            if led.get(number) != shard.leader_epoch:
                del self.shards[number]
                logger.info("no longer coordinating transactions of partition %d", number)
        for number, epoch in led.items():
            if number not in self.shards:
                shard = self.shards[number] = TxnShard(number, epoch)
                self._spawn(self._load(shard))

    async def _load(self, shard: TxnShard) -> None:
        started = time.monotonic()
        for _ in range(200):  # the replica manager may still be opening the partition
            p = self._partition(shard.partition)
            if p is not None and p.is_leader:
                break
            await asyncio.sleep(0.05)
        else:
            shard.failed = True
            shard.loaded.set()
            logger.error("__transaction_state-%d is not hosted here; cannot load", shard.partition)
            return
        try:
            records = await asyncio.to_thread(read_records, p)
            shard.txns = txn_records.load(records)
        except Exception:
            logger.exception("loading __transaction_state-%d failed", shard.partition)
            shard.failed = True
            shard.loaded.set()
            return
        shard.loaded.set()
        prepared = [m for m in shard.txns.values() if m.state.preparing]
        logger.info(
            "loaded __transaction_state-%d: %d transactional ids, %d to complete, in %.1f ms",
            shard.partition,
            len(shard.txns),
            len(prepared),
            (time.monotonic() - started) * 1000,
        )
        for meta in prepared:
            self._complete_later(shard, meta)

    def _reload(self, shard: TxnShard) -> None:
        if self.shards.get(shard.partition) is not shard:
            return
        fresh = self.shards[shard.partition] = TxnShard(shard.partition, shard.leader_epoch)
        self._spawn(self._load(fresh))

    # --- lookup ------------------------------------------------------------------------

    def coordinator(self, qualified: str) -> Coordinator:
        image = self.metadata.global_image()
        return locate(
            image,
            txn_topic(image),
            qualified,
            "the __transaction_state topic does not exist in this cluster yet; "
            "transactions are unavailable until it is created",
        )

    async def shard_for(self, qualified: str) -> TxnShard:
        return await loaded_shard(
            self.shards,
            self.coordinator(qualified),
            self.metadata.current().broker_id,
            "transactional id",
            "its transactions",
        )

    # --- writing -----------------------------------------------------------------------

    async def _persist(self, shard: TxnShard, meta: TxnMetadata) -> None:
        """Append ``meta`` with acks=all, then keep it; call under the shard's lock."""
        p = self._partition(shard.partition)
        if p is None or not p.is_leader or self.shards.get(shard.partition) is not shard:
            raise CoordinatorNotAvailableError(
                "this broker stopped leading the transactional id's __transaction_state "
                "partition; find the coordinator again"
            )
        record = (
            txn_records.encode_key(meta.transactional_id),
            txn_records.encode_value(meta),
        )
        try:
            await append_records(p, [record])
        except BaseException:
            self._reload(shard)  # the log may or may not hold it: rebuild from the log
            raise
        shard.txns[meta.transactional_id] = meta

    async def _fresh_id(self) -> int:
        return (await self.allocate_producer_id())[0]

    # --- requests ----------------------------------------------------------------------

    async def init_producer_id(
        self, qualified: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch) of the new instance.
        An ongoing transaction of the previous instance is aborted first (waited for up to
        ``INIT_WAIT_S``, else CONCURRENT_TRANSACTIONS, which the client retries)."""
        for _attempt in range(2):
            shard = await self.shard_for(qualified)
            async with shard.lock:
                meta = shard.txns.get(qualified)
                fresh = -1
                if meta is None or meta.producer_epoch + 1 >= txn.MAX_EPOCH:
                    fresh = await self._fresh_id()
                new = txn.init_producer_id(
                    meta,
                    transactional_id=qualified,
                    timeout_ms=timeout_ms,
                    expected_producer_id=producer_id,
                    expected_epoch=producer_epoch,
                    new_producer_id=lambda fresh=fresh: fresh,
                    now_ms=now_ms(),
                )
                await self._persist(shard, new)
            if new.state is not TxnState.PREPARE_ABORT:
                return new.producer_id, new.producer_epoch
            task = self._complete_later(shard, new)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), INIT_WAIT_S)
            if not task.done():
                break
            producer_id, producer_epoch = new.producer_id, new.producer_epoch
        raise TxnError(
            "CONCURRENT_TRANSACTIONS",
            "the previous instance's transaction is being aborted; retry shortly",
        )

    async def add_partitions(
        self, qualified: str, producer_id: int, producer_epoch: int, partitions: Iterable
    ) -> None:
        """AddPartitionsToTxn (``partitions``: (topic, partition) as the tenant names them)."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            meta = shard.txns.get(qualified)
            new = txn.add_partitions(
                meta, producer_id, producer_epoch, frozenset(partitions), now_ms()
            )
            if new is not meta:
                await self._persist(shard, new)

    async def add_offsets(
        self, qualified: str, producer_id: int, producer_epoch: int, qualified_group: str
    ) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction, so the marker reaches the group coordinator."""
        topic = offsets_topic(self.metadata.global_image())
        if topic is None or not topic.partitions:
            raise CoordinatorNotAvailableError("the __consumer_offsets topic does not exist yet")
        number = partition_for(qualified_group, len(topic.partitions))
        await self.add_partitions(qualified, producer_id, producer_epoch, [(OFFSETS_TOPIC, number)])

    async def end_txn(
        self, qualified: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        """EndTxn: the decision is durable once this returns; the markers are awaited up to
        ``END_TXN_WAIT_S`` so read_committed readers see a commit as soon as it is answered."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            meta = shard.txns.get(qualified)
            new = txn.end_txn(meta, producer_id, producer_epoch, commit, now_ms())
            if new is not meta:
                await self._persist(shard, new)
        if new.state.preparing:
            task = self._complete_later(shard, new)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), END_TXN_WAIT_S)

    def ongoing(self, qualified: str) -> TxnMetadata | None:
        """The id's metadata if this broker coordinates it and has it loaded (no waiting)."""
        try:
            c = self.coordinator(qualified)
        except CoordinatorNotAvailableError:
            return None
        shard = self.shards.get(c.partition)
        if shard is None or not shard.loaded.is_set():
            return None
        return shard.txns.get(qualified)

    async def describe(self, qualified: str) -> TxnMetadata | None:
        shard = await self.shard_for(qualified)
        return shard.txns.get(qualified)

    def local(self, tenant: str | None, *, all_tenants: bool = False) -> list[TxnMetadata]:
        """The transactions coordinated here (the tenant's, or all)."""
        out = []
        for shard in self.shards.values():
            if not shard.loaded.is_set() or shard.failed:
                continue
            for tid, meta in shard.txns.items():
                if all_tenants or unqualify(tid)[0] == tenant:
                    out.append(meta)
        return sorted(out, key=lambda m: m.transactional_id)

    # --- completion --------------------------------------------------------------------

    def _complete_later(self, shard: TxnShard, meta: TxnMetadata) -> asyncio.Task:
        task = shard.completing.get(meta.transactional_id)
        if task is None or task.done():
            task = self._spawn(self._complete(shard, meta))
            shard.completing[meta.transactional_id] = task
        return task

    async def _complete(self, shard: TxnShard, meta: TxnMetadata) -> None:
        """Write every marker of a prepared transaction (retrying), then append its
        completion. Stops when the shard is no longer led here: the next coordinator
        resumes from the prepared record."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        tenant = unqualify(meta.transactional_id)[0]
        remaining = set(meta.partitions)
        delay = 0.05
        while remaining:
            if self.shards.get(shard.partition) is not shard:
                return
            try:
                done = await self.markers.write(
                    tenant,
                    remaining,
                    meta.producer_id,
                    meta.producer_epoch,
                    commit,
                    shard.leader_epoch,
                )
            except Exception:
                logger.exception("writing markers of %s failed", meta.transactional_id)
                done = set()
            remaining -= done
            if remaining:
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        while self.shards.get(shard.partition) is shard:
            try:
                async with shard.lock:
                    current = shard.txns.get(meta.transactional_id)
                    if current != meta:
                        return  # changed meanwhile (a reload found it completed)
                    await self._persist(shard, txn.complete(current, now_ms()))
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                logger.info("completing %s: %s; retrying", meta.transactional_id, e)
                await asyncio.sleep(RETRY_MAX_S)

    # --- timer -------------------------------------------------------------------------

    async def _timer(self) -> None:
        while True:
            await asyncio.sleep(TIMER_INTERVAL_S)
            try:
                await self.abort_expired(now_ms())
                await self.forget_idle(now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("aborting timed-out transactions failed")

    async def abort_expired(self, now: int) -> None:
        """Abort (epoch bumped) every ongoing transaction older than its timeout."""
        for shard in list(self.shards.values()):
            if not shard.loaded.is_set() or shard.failed:
                continue
            for tid, meta in list(shard.txns.items()):
                if not meta.expired(now):
                    continue
                async with shard.lock:
                    meta = shard.txns.get(tid)
                    if meta is None or not meta.expired(now):
                        continue
                    fresh = -1
                    if meta.producer_epoch + 1 >= txn.MAX_EPOCH:
                        fresh = await self._fresh_id()
                    new = txn.begin_abort_on_timeout(meta, now, lambda fresh=fresh: fresh)
                    await self._persist(shard, new)
                logger.info(
                    "transaction of %s timed out after %d ms; aborting", tid, meta.timeout_ms
                )
                self._complete_later(shard, new)

    async def forget_idle(self, now: int, expiration_ms: int | None = None) -> None:
        """Tombstone the ids idle longer than the expiration (one append per shard)."""
        expiration = ID_EXPIRATION_MS if expiration_ms is None else expiration_ms
        for shard in list(self.shards.values()):
            if not shard.loaded.is_set() or shard.failed:
                continue
            if not any(m.idle(now, expiration) for m in shard.txns.values()):
                continue
            async with shard.lock:
                idle = [t for t, m in shard.txns.items() if m.idle(now, expiration)]
                p = self._partition(shard.partition)
                if not idle or p is None or not p.is_leader:
                    continue
                try:
                    await append_records(p, [(txn_records.encode_key(t), None) for t in idle])
                except BaseException:
                    self._reload(shard)
                    raise
                for t in idle:
                    del shard.txns[t]
            logger.info("forgot %d idle transactional ids in %d", len(idle), shard.partition)

    # --- produce verification ----------------------------------------------------------

    def check_produce(
        self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int, tp
    ) -> str | None:
        """Kafka's error name for a transactional batch of ``tp`` the transaction does not
        hold (None: it may be appended)."""
        if meta is None or meta.producer_id != producer_id:
            return "INVALID_PRODUCER_ID_MAPPING"
        if producer_epoch != meta.producer_epoch:
            return "INVALID_PRODUCER_EPOCH"
        if meta.state is not TxnState.ONGOING or tuple(tp) not in meta.partitions:
            return "INVALID_TXN_STATE"
        return None

    async def verify(
        self,
        qualified: str,
        producer_id: int,
        producer_epoch: int,
        tps: list[tuple[str, int]],
        leader_epoch: int = -1,
    ) -> dict[tuple[str, int], str | None]:
        """For a transactional produce on a partition leader: is each partition part of the
        producer's ongoing transaction? Asks the coordinator (here, or over the internal
        route). A positive answer is remembered for this leader epoch until that
        partition's marker is written here, so a transaction's later batches cost no round
        trip; a leadership change (a marker written while another broker led) forgets it."""
        key = (qualified, producer_id, producer_epoch)
        out: dict[tuple[str, int], str | None] = {}
        ask = []
        for tp in map(tuple, tps):
            if self.verified.get((key, tp)) == leader_epoch:
                out[tp] = None
            else:
                ask.append(tp)
        if not ask:
            return out
        c = self.coordinator(qualified)
        if c.broker_id == self.metadata.global_image().broker_id:
            shard = await self.shard_for(qualified)
            meta = shard.txns.get(qualified)
            answers = {tp: self.check_produce(meta, producer_id, producer_epoch, tp) for tp in ask}
        else:
            answers = await self.markers.verify_remote(
                c.url, qualified, producer_id, producer_epoch, ask
            )
        if len(self.verified) > MAX_VERIFIED:
            self.verified.clear()  # a cache: entries whose marker landed elsewhere add up
        for tp, error in answers.items():
            out[tp] = error
            if error is None:
                self.verified[(key, tp)] = leader_epoch
        return out

    def forget_verified(self, marker) -> None:
        """A marker was written to a partition here: the producer's next transaction there
        must be verified again."""
        for entry in [e for e in self.verified if e[0][1] == marker.producer_id]:
            (qualified, _, _), (topic, number) = entry
            if number != marker.partition:
                continue
            found = self.markers.resolve(unqualify(qualified)[0], topic, number)
            if found is None or found[1] == marker.log_key:
                self.verified.pop(entry, None)
