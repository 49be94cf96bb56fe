"""Writing a transaction's markers to its partitions, wherever their leaders are.

A partition this broker leads gets its marker through ``Partition.write_txn_marker`` (a
``__consumer_offsets`` partition through the group coordinator, which applies the marker to
its pending transactional offsets under its lock). A partition another broker leads gets it
through that broker's internal route (``POST /internal/v1/transactions/markers``,
``Authorization: Cluster <secret>``), which calls ``apply_marker`` there. ``write`` answers
which partitions are done; the coordinator retries the rest until they are.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brokernodes.server.coordinator.offsets_topic import OFFSETS_TOPIC, offsets_topic

if TYPE_CHECKING:
    from brokernodes.server.coordinator.group_coordinator import GroupCoordinator
    from brokernodes.server.metadata.cluster import MetadataSource
    from brokernodes.server.replica.manager import ReplicaManager

logger = logging.getLogger("sluice.broker.transactions")
ROUTE = "/internal/v1/transactions/markers"
VERIFY_ROUTE = "/internal/v1/transactions/verify"
REMOTE_TIMEOUT_S = 15


@dataclass(frozen=True, slots=True)
class Marker:
    log_key: str  # the partition's log directory name (stable across renames and tenants)
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int

    def to_json(self) -> dict:
        return {
            "log_key": self.log_key,
            "partition": self.partition,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "commit": self.commit,
            "coordinator_epoch": self.coordinator_epoch,
        }

    @classmethod
    def from_json(cls, d: dict) -> Marker:
        return cls(
            str(d["log_key"]),
            int(d["partition"]),
            int(d["producer_id"]),
            int(d["producer_epoch"]),
            bool(d["commit"]),
            int(d["coordinator_epoch"]),
        )


class MarkerError(Exception):
    """The marker could not be written here (not the leader, not hosted, a log error)."""


async def apply_marker(
    replicas: ReplicaManager, groups: GroupCoordinator, metadata: MetadataSource, m: Marker
) -> int:
    """Write one marker to a partition this broker leads; returns its offset."""
    p = replicas.partitions.get((m.log_key, m.partition))
    if p is None or not p.is_leader:
        raise MarkerError(f"{m.log_key}-{m.partition} is not led by this broker")
    offsets = offsets_topic(metadata.global_image())
    if (
        offsets is not None
        and m.partition < len(offsets.partitions)
        and offsets.partitions[m.partition].log_key == m.log_key
    ):
        return await groups.write_txn_marker(
            m.partition, p, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch
        )
    return await p.write_txn_marker(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)


class MarkerWriter:
    def __init__(
        self,
        metadata: MetadataSource,
        replicas: ReplicaManager,
        groups: GroupCoordinator,
        cluster_secret: str,
    ) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.groups = groups
        self.cluster_secret = cluster_secret
        self._session = None
        self.on_written: Callable[[Marker], None] | None = None

    async def apply(self, m: Marker) -> int:
        """Write one marker to a partition led here (``apply_marker``) and tell the
        coordinator's produce verification."""
        offset = await apply_marker(self.replicas, self.groups, self.metadata, m)
        if self.on_written is not None:
            self.on_written(m)
        return offset

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def resolve(self, tenant: str | None, topic: str, partition: int) -> tuple[int, str] | None:
        """(leader broker id, log key) of a transaction's partition; None when the topic or
        partition no longer exists (nothing to mark)."""
        root = self.metadata.global_image()
        if topic == OFFSETS_TOPIC:
            info = offsets_topic(root)
        else:
            view = root if tenant is None else root.for_tenant(tenant)
            info = view.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        p = info.partitions[partition]
        return p.leader, p.log_key

    async def write(
        self,
        tenant: str | None,
        partitions: Iterable[tuple[str, int]],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> set[tuple[str, int]]:
        """Write the markers; returns the partitions done (written, or gone)."""
        root = self.metadata.global_image()
        done: set[tuple[str, int]] = set()
        local: list[tuple[tuple[str, int], Marker]] = []
        remote: dict[int, list[tuple[tuple[str, int], Marker]]] = defaultdict(list)
        for tp in partitions:
            found = self.resolve(tenant, *tp)
            if found is None:
                done.add(tp)
                continue
            leader, log_key = found
            m = Marker(log_key, tp[1], producer_id, producer_epoch, commit, coordinator_epoch)
            (local if leader == root.broker_id else remote[leader]).append((tp, m))
        for tp, m in local:
            try:
                await self.apply(m)
                done.add(tp)
            except Exception as e:
                logger.info("marker for %s-%d not written yet: %s", tp[0], tp[1], e)
        if remote:
            answers = await asyncio.gather(
                *(self._send(root.broker_url(b), ms) for b, ms in remote.items())
            )
            for got in answers:
                done.update(got)
        return done

    async def _send(
        self, url: str | None, markers: list[tuple[tuple[str, int], Marker]]
    ) -> set[tuple[str, int]]:
        if not url or not self.cluster_secret:
            return set()
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REMOTE_TIMEOUT_S)
            )
        body = {"markers": [m.to_json() for _, m in markers]}
        headers = {"Authorization": f"Cluster {self.cluster_secret}"}
        try:
            async with self._session.post(url + ROUTE, json=body, headers=headers) as resp:
                if resp.status != 200:
                    logger.info("%s refused markers: %d", url, resp.status)
                    return set()
                results = (await resp.json())["results"]
        except Exception as e:
            logger.info("markers to %s not written yet: %s", url, e)
            return set()
        return {tp for (tp, _), r in zip(markers, results, strict=False) if r.get("error") is None}

    async def verify_remote(
        self,
        url: str | None,
        qualified: str,
        producer_id: int,
        producer_epoch: int,
        tps: list[tuple[str, int]],
    ) -> dict[tuple[str, int], str | None]:
        """Ask the coordinator at ``url`` whether ``tps`` are in the producer's transaction
        (an unreachable coordinator answers NOT_COORDINATOR: the producer retries)."""
        unknown = dict.fromkeys(tps, "NOT_COORDINATOR")
        if not url or not self.cluster_secret:
            return unknown
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REMOTE_TIMEOUT_S)
            )
        body = {
            "transactional_id": qualified,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "partitions": [list(tp) for tp in tps],
        }
        headers = {"Authorization": f"Cluster {self.cluster_secret}"}
        try:
            async with self._session.post(url + VERIFY_ROUTE, json=body, headers=headers) as r:
                if r.status != 200:
                    return unknown
                errors = (await r.json())["errors"]
        except Exception as e:
            logger.info("verifying a transaction at %s failed: %s", url, e)
            return unknown
        return {tp: e for tp, e in zip(tps, errors, strict=False)}
