"""The classic group protocol's requests on the coordinator (a mixin of ``GroupCoordinator``).

Each request runs under the shard's lock: apply it to the group's pure state machine
(``brokernodes.groups.classic``), persist what changed with acks=all (``_persist``, which also
hands the answers of parked requests to their waiters once the append succeeded), and answer.
A JoinGroup or SyncGroup that must wait for its phase parks on a future keyed by (group,
member, kind), outside the lock, bounded by the rebalance timeout; the shard's timer ends
phases whose deadline passed. If the shard is dropped or reloaded, every parked request is
answered NOT_COORDINATOR so the client finds the coordinator again.

A group id held by a KIP-848 consumer group with members cannot be joined classically
(INCONSISTENT_GROUP_PROTOCOL), and the other way round; an empty group of either kind (only
committed offsets left) is taken over by whichever protocol joins it next, keeping its offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from brokernodes.groups import ConsumerGroup
from brokernodes.groups.classic import (
    ClassicConfig,
    ClassicGroup,
    ClassicGroupError,
    JoinResponse,
    Parked,
    SyncResponse,
)

if TYPE_CHECKING:
    from brokernodes.server.coordinator.group_coordinator import Shard

PARK_MARGIN_S = 5.0  # a parked request's bound past its rebalance timeout


def _inconsistent(kind: str) -> ClassicGroupError:
    return ClassicGroupError(
        "INCONSISTENT_GROUP_PROTOCOL",
        f"this group id is in use by a {kind} group with members; use another group id",
    )


class ClassicGroupRequests:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for ``GroupCoordinator``."""

    classic_config: ClassicConfig  # set by GroupCoordinator, with shard_for and _persist

    # --- waiters ------------------------------------------------------------------------

    def _park(self, shard: Shard, gid: str, parked: Parked) -> asyncio.Future:
        key = (gid, parked.member_id, parked.kind)
        old = shard.waiters.pop(key, None)
        if old is not None and not old.done():  # a retry replaces a request still parked
            old.set_result(_error_answer(parked.kind, parked.member_id, "REBALANCE_IN_PROGRESS"))
        future = shard.waiters[key] = asyncio.get_running_loop().create_future()
        return future

    @staticmethod
    def _resolve(shard: Shard, gid: str, completions: Iterable) -> None:
        for member_id, kind, response in completions:
            future = shard.waiters.pop((gid, member_id, kind), None)
            if future is not None and not future.done():
                future.set_result(response)

    @staticmethod
    def _fail_waiters(shard: Shard, error: str = "NOT_COORDINATOR") -> None:
        waiters, shard.waiters = shard.waiters, {}
        for (_gid, member_id, kind), future in waiters.items():
            if not future.done():
                future.set_result(_error_answer(kind, member_id, error))

    async def _wait(self, shard: Shard, gid: str, parked: Parked, future, timeout_ms: int):
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000 + PARK_MARGIN_S)
        except TimeoutError:
            shard.waiters.pop((gid, parked.member_id, parked.kind), None)
            return _error_answer(parked.kind, parked.member_id, "REBALANCE_IN_PROGRESS")

    @contextlib.contextmanager
    def _answering(self, shard: Shard, gid: str, group: ClassicGroup):
        """A refused request may still have answered parked ones (a failed generation tells
        them to rejoin); nothing durable changed then, so they are answered at once."""
        try:
            yield
        except ClassicGroupError:
            self._resolve(shard, gid, group.drain())
            raise

    def _classic(self, shard: Shard, gid: str) -> ClassicGroup:
        group = shard.groups.get(gid)
        if group is None:
            raise ClassicGroupError("UNKNOWN_MEMBER_ID", "the group does not exist; rejoin")
        if not isinstance(group, ClassicGroup):
            raise _inconsistent("consumer (KIP-848)")
        return group

    # --- requests -----------------------------------------------------------------------

    async def join_group(
        self,
        qualified: str,
        *,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = False,
    ) -> JoinResponse:
        shard = await self.shard_for(qualified)
        async with shard.lock:
            before = shard.groups.get(qualified)
            group = before
            if isinstance(group, ConsumerGroup):
                if not group.is_empty:
                    raise _inconsistent("consumer (KIP-848)")
                group = None  # an empty consumer group: the classic protocol takes it over
            if group is None:
                if member_id:
                    raise ClassicGroupError(
                        "UNKNOWN_MEMBER_ID", f"member {member_id!r} is not in this group"
                    )
                group = ClassicGroup(qualified, self.classic_config)
            assert isinstance(group, ClassicGroup)
            with self._answering(shard, qualified, group):
                result = group.join(
                    now_ms(),
                    member_id=member_id,
                    protocol_type=protocol_type,
                    protocols=protocols,
                    session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                    instance_id=instance_id,
                    client_id=client_id,
                    client_host=client_host,
                    require_known_member_id=require_known_member_id,
                    supports_skip_assignment=supports_skip_assignment,
                )
            if group is not before:
                shard.groups[qualified] = group
            future = self._park(shard, qualified, result) if isinstance(result, Parked) else None
            await self._persist(shard, qualified)
        if future is None:
            return result
        timeout = group.rebalance_timeout_ms
        return await self._wait(shard, qualified, result, future, timeout)

    async def sync_group(
        self,
        qualified: str,
        *,
        member_id: str,
        generation_id: int,
        assignments: Iterable[tuple[str, bytes]] = (),
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResponse:
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = self._classic(shard, qualified)
            with self._answering(shard, qualified, group):
                result = group.sync(
                    now_ms(),
                    member_id=member_id,
                    generation_id=generation_id,
                    assignments=assignments,
                    instance_id=instance_id,
                    protocol_type=protocol_type,
                    protocol_name=protocol_name,
                )
            future = self._park(shard, qualified, result) if isinstance(result, Parked) else None
            await self._persist(shard, qualified)
        if future is None:
            return result
        return await self._wait(shard, qualified, result, future, group.rebalance_timeout_ms)

    async def classic_heartbeat(
        self,
        qualified: str,
        *,
        member_id: str,
        generation_id: int,
        instance_id: str | None = None,
    ) -> None:
        """Raises the error to answer (REBALANCE_IN_PROGRESS: rejoin)."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = self._classic(shard, qualified)
            group.heartbeat(
                now_ms(), member_id=member_id, generation_id=generation_id, instance_id=instance_id
            )

    async def leave_group(
        self, qualified: str, members: Sequence[tuple[str, str | None]]
    ) -> list[tuple[str, str | None, str | None]]:
        """LeaveGroup: per member (member id, instance id, error or None)."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = self._classic(shard, qualified)
            out = group.leave(now_ms(), members)
            await self._persist(shard, qualified)
        return out


def now_ms() -> int:
    return int(time.time() * 1000)


def _error_answer(kind: str, member_id: str, error: str) -> JoinResponse | SyncResponse:
    if kind == "join":
        return JoinResponse(member_id=member_id, error=error)
    return SyncResponse(error=error)
