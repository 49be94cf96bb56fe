"""The coordinator's classic layer (``server/coordinator/classic_requests.py``) over a stand-in
``__consumer_offsets`` partition: parked JoinGroup/SyncGroup answered when the phase ends and
only after the group's record is appended, the timer ending a join phase, a failed append
answering parked requests NOT_COORDINATOR, the protocol-kind checks, an oversized generation,
and the appended records reloading to the same generation."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.errors import SluiceError
from brokernodes.groups import ConsumerGroup, TopicPartition, load_records
from brokernodes.groups import consumer_protocol as cp
from brokernodes.groups.classic import (
    ClassicConfig,
    ClassicGroup,
    ClassicGroupError,
    ClassicState,
)
from brokernodes.records.batch import decode_batches
from brokernodes.server.coordinator.group_coordinator import GroupCoordinator, Shard, now_ms

DELAY = 100


class FakePartition:
    is_leader = True

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.fail = False

    async def append_as_leader(self, buf, acks):
        assert acks == -1  # acks=all
        if self.fail:
            raise SluiceError("the append failed")
        self.batches.append(bytes(buf))

    def records(self):
        return [
            (r.key, r.value)
            for b in self.batches
            for batch in decode_batches(b)
            for r in batch.records
        ]


class Metadata:
    def global_image(self):
        return None


@pytest.fixture
def coord(monkeypatch):
    c = GroupCoordinator(Metadata(), None, ClassicConfig(initial_rebalance_delay_ms=DELAY))
    shard = Shard(0, 0)
    shard.loaded.set()
    c.shards[0] = shard
    c.partition = FakePartition()

    async def shard_for(_qualified):
        return c.shards[0]

    async def no_load(_shard):
        return None

    monkeypatch.setattr(c, "shard_for", shard_for)
    monkeypatch.setattr(c, "_partition", lambda _image, _n: c.partition)
    monkeypatch.setattr(c, "_load", no_load)
    return c


def protocols(*topics: str):
    return [("range", cp.encode_subscription(list(topics)))]


async def join(c: GroupCoordinator, member_id: str = "", **kw):
    return await c.join_group(
        "g",
        member_id=member_id,
        protocol_type="consumer",
        protocols=kw.pop("protocols", protocols("t")),
        session_timeout_ms=10_000,
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 5_000),
        client_id=kw.pop("client_id", "c"),
        **kw,
    )


async def new_member(c: GroupCoordinator, **kw):
    first = await join(c, **kw)
    assert first.error == "MEMBER_ID_REQUIRED"
    return first.member_id


async def with_timer(c: GroupCoordinator, coro):
    timer = asyncio.create_task(c._timer())
    try:
        return await asyncio.wait_for(coro, 10)
    finally:
        timer.cancel()


def test_join_sync_round_trip_answers_after_the_append(coord):
    async def scenario():
        a = await new_member(coord, client_id="a")
        b = await new_member(coord, client_id="b")
        ja, jb = await with_timer(coord, asyncio.gather(join(coord, a), join(coord, b)))
        assert ja.error is None and ja.generation_id == jb.generation_id == 1
        leader, follower = (ja, jb) if ja.leader == a else (jb, ja)
        assert len(leader.members) == 2 and follower.members == []
        assert coord.partition.batches == []  # nothing durable before the generation completes
        follower_sync = asyncio.create_task(
            coord.sync_group("g", member_id=follower.member_id, generation_id=1)
        )
        await asyncio.sleep(0.05)
        assert not follower_sync.done()  # waits for the leader
        assignments = [
            (leader.member_id, cp.encode_assignment([TopicPartition("t", 0)])),
            (follower.member_id, cp.encode_assignment([TopicPartition("t", 1)])),
        ]
        mine = await coord.sync_group(
            "g", member_id=leader.member_id, generation_id=1, assignments=assignments
        )
        theirs = await asyncio.wait_for(follower_sync, 5)
        assert cp.assigned_partitions(mine.assignment) == [TopicPartition("t", 0)]
        assert cp.assigned_partitions(theirs.assignment) == [TopicPartition("t", 1)]
        assert len(coord.partition.batches) == 1  # the generation, appended once
        await coord.classic_heartbeat("g", member_id=a, generation_id=1)
        # what was appended reloads to the same generation (a coordinator failover)
        state = load_records(coord.partition.records(), 0)
        loaded = state.groups["g"]
        assert isinstance(loaded, ClassicGroup) and loaded.generation == 1
        assert loaded.state is ClassicState.STABLE and set(loaded.members) == {a, b}
        # everyone leaves: the group is gone, its record tombstoned
        out = await coord.leave_group("g", [(a, None), (b, None)])
        assert [e for _, _, e in out] == [None, None]
        assert "g" not in coord.shards[0].groups
        assert coord.partition.records()[-1][1] is None

    asyncio.run(scenario())


def test_a_failed_append_answers_parked_requests_not_coordinator(coord):
    async def scenario():
        a = await new_member(coord)
        b = await new_member(coord)
        ja, jb = await with_timer(coord, asyncio.gather(join(coord, a), join(coord, b)))
        leader, follower = (ja, jb) if ja.leader == a else (jb, ja)
        parked = asyncio.create_task(
            coord.sync_group("g", member_id=follower.member_id, generation_id=1)
        )
        await asyncio.sleep(0.05)
        coord.partition.fail = True
        with pytest.raises(SluiceError):
            await coord.sync_group("g", member_id=leader.member_id, generation_id=1)
        answer = await asyncio.wait_for(parked, 5)
        assert answer.error == "NOT_COORDINATOR"
        assert coord.shards[0].waiters == {}

    asyncio.run(scenario())


def test_an_oversized_generation_fails_and_everyone_rejoins(coord):
    coord.classic_config = ClassicConfig(initial_rebalance_delay_ms=DELAY, max_group_bytes=100)

    async def scenario():
        a = await new_member(coord)
        b = await new_member(coord)
        ja, jb = await with_timer(coord, asyncio.gather(join(coord, a), join(coord, b)))
        leader, follower = (ja, jb) if ja.leader == a else (jb, ja)
        parked = asyncio.create_task(
            coord.sync_group("g", member_id=follower.member_id, generation_id=1)
        )
        await asyncio.sleep(0.05)
        with pytest.raises(ClassicGroupError) as e:
            await coord.sync_group(
                "g",
                member_id=leader.member_id,
                generation_id=1,
                assignments=[(follower.member_id, b"x" * 200)],
            )
        assert e.value.error_code == "UNKNOWN_SERVER_ERROR"
        assert (await asyncio.wait_for(parked, 5)).error == "REBALANCE_IN_PROGRESS"
        assert coord.partition.batches == []

    asyncio.run(scenario())


def test_protocol_kinds_do_not_mix_but_empty_groups_are_taken_over(coord):
    async def scenario():
        shard = coord.shards[0]
        busy = ConsumerGroup("g")
        busy.heartbeat(None, 0, 0, subscriptions=["t"])
        shard.groups["g"] = busy
        with pytest.raises(ClassicGroupError) as e:
            await join(coord)
        assert e.value.error_code == "INCONSISTENT_GROUP_PROTOCOL"
        with pytest.raises(ClassicGroupError) as e:
            await coord.classic_heartbeat("g", member_id="m", generation_id=1)
        assert e.value.error_code == "INCONSISTENT_GROUP_PROTOCOL"
        shard.groups["g"] = ConsumerGroup("g")  # empty: the classic protocol takes it
        assert (await join(coord)).error == "MEMBER_ID_REQUIRED"
        assert isinstance(shard.groups["g"], ClassicGroup)
        a = next(iter(shard.groups["g"].pending_members))
        await with_timer(coord, join(coord, a))
        with pytest.raises(ClassicGroupError) as e:
            await coord.heartbeat("g", None, 0, subscriptions=["t"])
        assert e.value.error_code == "INCONSISTENT_GROUP_PROTOCOL"
        with pytest.raises(ClassicGroupError) as e:
            await coord.sync_group("missing", member_id="x", generation_id=1)
        assert e.value.error_code == "UNKNOWN_MEMBER_ID"

    asyncio.run(scenario())


def test_a_parked_join_is_answered_by_the_timer_and_a_retry_replaces_it(coord):
    async def scenario():
        a = await new_member(coord)
        first = asyncio.create_task(join(coord, a))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(join(coord, a))  # the client retried
        assert (await asyncio.wait_for(first, 5)).error == "REBALANCE_IN_PROGRESS"
        answer = await with_timer(coord, second)
        assert answer.error is None and answer.generation_id == 1 and answer.leader == a

    asyncio.run(scenario())


def test_closing_the_coordinator_answers_parked_joins(coord):
    async def scenario():
        a = await new_member(coord)
        parked = asyncio.create_task(join(coord, a))  # waits for the initial delay
        await asyncio.sleep(0.01)
        await coord.close()
        assert (await asyncio.wait_for(parked, 5)).error == "COORDINATOR_NOT_AVAILABLE"

    asyncio.run(scenario())


def test_expired_members_are_forgotten_with_their_client_ids_and_hosts(coord, monkeypatch):
    """Describe remembers each member's client id and host; a member whose session
    expires leaves nothing behind (they used to stay for the coordinator's life)."""
    monkeypatch.setattr(coord, "partition_counts", lambda _group, _topics: {"t": 2})

    async def scenario():
        await coord.heartbeat("kg", None, 0, subscriptions=["t"], session_timeout_ms=2_000)
        (member_id,) = coord.shards[0].groups["kg"].members
        coord.client_ids["kg", member_id] = "client-a"
        coord.client_hosts["kg", member_id] = "10.0.0.7"
        await coord.expire_sessions(now_ms() + 60_000)
        group = coord.shards[0].groups.get("kg")
        assert group is None or group.members == {}
        assert ("kg", member_id) not in coord.client_ids
        assert ("kg", member_id) not in coord.client_hosts

    asyncio.run(scenario())
