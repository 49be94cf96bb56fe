"""The group service over a stand-in coordinator and log-offsets reader (no broker, no HTTP):
commits ask log ends only past the last end seen, resets plan from the leaders' answers
and apply only when asked, explicit offsets need an inactive group."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from brokernodes.errors import UnknownTopicOrPartitionError
from brokernodes.groups import NonEmptyGroupError, OffsetAndMetadata, ResetSpec, TopicPartition
from brokernodes.groups.offsets import OffsetStore
from brokernodes.server.coordinator.service import GroupService
from brokernodes.server.metadata.cluster import parse_metadata
from brokernodes.server.protocol.log_offsets import LogOffsets

IMAGE = parse_metadata(
    {
        "cluster_id": "c",
        "broker_id": 1,
        "brokers": [{"id": 1, "url": "http://a"}],
        "topics": [{"name": "t", "partitions": 2, "leaders": [1, 1]}],
    }
)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class StandInCoordinator:
    def __init__(self) -> None:
        self.metadata = SimpleNamespace(global_image=lambda: IMAGE)
        self.known_ends: dict = {}
        self.client_ids: dict = {}
        self.shard = SimpleNamespace(groups={}, offsets=OffsetStore())
        self.commits: list = []
        self.applied: list = []

    async def commit(self, qualified, member_id, member_epoch, offsets, ends) -> None:
        self.commits.append((qualified, dict(ends)))

    async def shard_for(self, qualified):
        return self.shard

    async def apply_offsets(self, qualified, offsets, deletes=(), *, check_empty) -> None:
        check_empty(self.shard.groups.get(qualified))
        self.applied.append((qualified, dict(offsets), list(deletes)))


class Reader:
    """Answers every question with log start 3 and high watermark ``hw``; records them."""

    def __init__(self, hw: int = 10) -> None:
        self.hw = hw
        self.asked: list[list[tuple[str, int]]] = []

    async def __call__(self, view, queries, auth):
        queries = list(queries)
        self.asked.append([(q.topic, q.partition) for q in queries])
        return {(q.topic, q.partition): LogOffsets(3, self.hw) for q in queries}


def _commit(offset: int) -> dict:
    return {TP0: OffsetAndMetadata(offset, None, "", 0)}


def test_commits_ask_log_ends_only_past_the_last_end_seen():
    coordinator, reader = StandInCoordinator(), Reader(hw=10)
    service = GroupService(coordinator, reader)

    async def run():
        await service.commit(None, "g", "m", 1, _commit(4), None)
        await service.commit(None, "g", "m", 1, _commit(10), None)  # at the known end
        reader.hw = 20
        await service.commit(None, "g", "m", 1, _commit(11), None)  # past it: ask again

    asyncio.run(run())
    assert reader.asked == [[("t", 0)], [("t", 0)]]
    assert [ends for _, ends in coordinator.commits] == [{TP0: 10}, {TP0: 10}, {TP0: 20}]


def test_a_commit_to_an_unknown_partition_asks_nobody():
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    offsets = {TopicPartition("t", 5): OffsetAndMetadata(1, None, "", 0)}
    with pytest.raises(UnknownTopicOrPartitionError):
        asyncio.run(service.commit(None, "g", "m", 1, offsets, None))
    assert reader.asked == [] and coordinator.commits == []


def test_a_reset_plans_from_the_leaders_answers_and_applies_only_when_asked():
    coordinator, reader = StandInCoordinator(), Reader(hw=10)
    coordinator.shard.offsets.commit("g", {TP0: OffsetAndMetadata(7, None, "", 0)})
    service = GroupService(coordinator, reader)
    spec = ResetSpec.to_earliest()
    dry = asyncio.run(service.reset_offsets(None, "g", "t", None, spec, dry_run=True, auth=None))
    assert dry["applied"] is False and coordinator.applied == []
    assert [(r["partition"], r["current"], r["target"], r["delta"]) for r in dry["plan"]] == [
        (0, 7, 3, -4),
        (1, None, 3, None),
    ]
    done = asyncio.run(service.reset_offsets(None, "g", "t", [1], spec, dry_run=False, auth=None))
    assert done["applied"] is True
    assert coordinator.applied == [("g", {TP1: 3}, [])]


def test_explicit_offsets_need_an_inactive_group():
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    coordinator.shard.groups["g"] = SimpleNamespace(is_empty=False, members={"m": None})
    with pytest.raises(NonEmptyGroupError, match="1 member"):
        asyncio.run(service.set_offsets(None, "g", {TP0: 5}, [TP1], dry_run=True))
    coordinator.shard.groups.clear()
    plan = asyncio.run(service.set_offsets(None, "g", {TP0: 5}, [TP1], dry_run=False))
    assert [(r["partition"], r["target"]) for r in plan["plan"]] == [(0, 5), (1, None)]
    assert coordinator.applied == [("g", {TP0: 5}, [TP1])]
