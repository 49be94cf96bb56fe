"""The group service over a stand-in coordinator and log-offsets reader (no broker, no HTTP):
member commits ask no log ends, admin commits ask only past the last end seen, resets plan
from the leaders' answers and apply only when asked, explicit offsets need an inactive
group."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from brokernodes.errors import UnknownTopicOrPartitionError
from brokernodes.groups import (
    ConsumerGroup,
    GroupIdNotFoundError,
    HeartbeatResponse,
    NonEmptyGroupError,
    OffsetAndMetadata,
    ResetSpec,
    TopicPartition,
)
from brokernodes.groups.classic import ClassicGroup
from brokernodes.groups.offsets import OffsetStore
from brokernodes.server.auth import current_client_host
from brokernodes.server.coordinator.service import GroupService, bare_host
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
        self.client_hosts: dict = {}
        self.shard = SimpleNamespace(groups={}, offsets=OffsetStore())
        self.commits: list = []
        self.applied: list = []

    async def commit(self, qualified, member_id, member_epoch, offsets, ends) -> None:
        self.commits.append((qualified, None if ends is None else dict(ends)))

    async def shard_for(self, qualified):
        return self.shard

    async def apply_offsets(self, qualified, offsets, deletes=(), *, check_empty) -> None:
        check_empty(self.shard.groups.get(qualified))
        self.applied.append((qualified, dict(offsets), list(deletes)))

    async def group(self, qualified):
        group = self.shard.groups.get(qualified)
        offsets = self.shard.offsets.fetch(qualified)
        if group is None and not offsets:
            raise GroupIdNotFoundError(f"no group {qualified}")
        return group, offsets

    def local_groups(self, tenant):
        return sorted(set(self.shard.groups) | self.shard.offsets.groups())

    def coordinator(self, qualified):
        return SimpleNamespace(broker_id=1)


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


def test_admin_commits_ask_log_ends_only_past_the_last_end_seen():
    coordinator, reader = StandInCoordinator(), Reader(hw=10)
    service = GroupService(coordinator, reader)

    async def run():
        await service.commit(None, "g", None, -1, _commit(4), None)
        await service.commit(None, "g", None, -1, _commit(10), None)  # at the known end
        reader.hw = 20
        await service.commit(None, "g", None, -1, _commit(11), None)  # past it: ask again

    asyncio.run(run())
    assert reader.asked == [[("t", 0)], [("t", 0)]]
    assert [ends for _, ends in coordinator.commits] == [{TP0: 10}, {TP0: 10}, {TP0: 20}]


def test_member_commits_ask_no_log_ends():
    coordinator, reader = StandInCoordinator(), Reader(hw=10)
    service = GroupService(coordinator, reader)

    async def run():
        await service.commit(None, "g", "m", 1, _commit(4), None)
        await service.commit(None, "g", "m", 1, _commit(50), None)  # past the end: a member's

    asyncio.run(run())
    assert reader.asked == []
    assert [ends for _, ends in coordinator.commits] == [None, None]


def test_a_commit_to_an_unknown_partition_asks_nobody():
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    offsets = {TopicPartition("t", 5): OffsetAndMetadata(1, None, "", 0)}
    with pytest.raises(UnknownTopicOrPartitionError):
        asyncio.run(service.commit(None, "g", None, -1, offsets, None))
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


def _member_group(subscriptions: list[str]) -> ConsumerGroup:
    group = ConsumerGroup("g", partition_counts={"t": 2, "u": 1})
    group.heartbeat("m", 0, 0, subscriptions=subscriptions)
    return group


def test_offsets_of_subscribed_topics_are_not_deleted():
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    with pytest.raises(GroupIdNotFoundError):
        asyncio.run(service.delete_offsets(None, "g", [TP0]))
    coordinator.shard.groups["g"] = _member_group(["t"])
    tu = TopicPartition("u", 0)
    outcome = asyncio.run(service.delete_offsets(None, "g", [TP0, tu, TP1]))
    assert {tp: e and e.error_code for tp, e in outcome.items()} == {
        TP0: "GROUP_SUBSCRIBED_TO_TOPIC",
        TP1: "GROUP_SUBSCRIBED_TO_TOPIC",
        tu: None,
    }
    assert coordinator.applied == [("g", {}, [tu])]


def test_an_offset_delete_checks_again_under_the_lock():
    """A member subscribing between the plan and the delete keeps its offsets."""
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    coordinator.shard.groups["g"] = _member_group(["t"])
    tu = TopicPartition("u", 0)
    real_group = coordinator.group
    calls = []

    async def group_then_subscribe(qualified):
        answer = await real_group(qualified)
        if not calls:  # after the first look, a member subscribes to u too
            coordinator.shard.groups["g"] = _member_group(["t", "u"])
        calls.append(qualified)
        return answer

    coordinator.group = group_then_subscribe
    outcome = asyncio.run(service.delete_offsets(None, "g", [tu]))
    assert outcome[tu].error_code == "GROUP_SUBSCRIBED_TO_TOPIC"
    assert coordinator.applied == [] and len(calls) == 2


def test_groups_are_listed_as_kafka_names_them():
    coordinator, reader = StandInCoordinator(), Reader()
    service = GroupService(coordinator, reader)
    coordinator.shard.groups["active"] = _member_group(["t"])
    coordinator.shard.groups["classic"] = ClassicGroup("classic")
    coordinator.shard.offsets.commit("offsets-only", {TP0: OffsetAndMetadata(1, None, "", 0)})
    rows = asyncio.run(service.list_groups(None))
    assert [(r.group_id, r.group_type, r.protocol_type, r.state) for r in rows] == [
        ("active", "consumer", "consumer", "Stable"),
        ("classic", "classic", "", "Empty"),
        ("offsets-only", "classic", "", "Empty"),
    ]
    assert asyncio.run(service.consumer_group(None, "active")) is coordinator.shard.groups["active"]
    for other in ("classic", "offsets-only"):
        with pytest.raises(GroupIdNotFoundError, match="not a consumer-protocol group"):
            asyncio.run(service.consumer_group(None, other))


def test_member_clients_are_remembered_until_the_member_leaves():
    coordinator, reader = StandInCoordinator(), Reader()
    responses = iter([HeartbeatResponse("m", 1, 5000), HeartbeatResponse("m", -1, 5000)])

    async def heartbeat(qualified, member_id, member_epoch, **options):
        return next(responses)

    coordinator.heartbeat = heartbeat
    service = GroupService(coordinator, reader)
    asyncio.run(service.heartbeat(None, "g", None, 0, client_id="app", client_host="10.0.0.1"))
    # another service over the same coordinator (the other front) sees the same member
    assert GroupService(coordinator, reader).member_client(None, "g", "m") == ("app", "10.0.0.1")
    asyncio.run(service.heartbeat(None, "g", "m", -1))
    assert service.member_client(None, "g", "m") == (None, None)


def _classic_group(gid: str) -> ClassicGroup:
    member = {
        "member_id": "c-1",
        "instance_id": None,
        "client_id": "rdkafka",
        "client_host": "/10.0.0.7",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "subscription": b"",
        "assignment": b"",
    }
    doc = {"protocol_type": "consumer", "generation": 3, "protocol": "range", "members": [member]}
    return ClassicGroup.restore(gid, doc, 0)


def test_describe_names_the_type_the_kafka_state_and_each_members_host():
    coordinator, reader = StandInCoordinator(), Reader()
    coordinator.heartbeat = lambda *a, **k: asyncio.sleep(0, HeartbeatResponse("m", 1, 5000))
    service = GroupService(coordinator, reader)
    coordinator.shard.groups["active"] = _member_group(["t"])
    coordinator.shard.groups["classic"] = _classic_group("classic")

    async def heartbeat_from(host: str) -> None:  # a front sets the peer's address
        current_client_host.set(host)
        await service.heartbeat(None, "active", "m", 1, client_id="sdk")

    asyncio.run(heartbeat_from("10.0.0.8"))
    active = asyncio.run(service.describe(None, "active", None))
    assert (active["type"], active["state"]) == ("consumer", "STABLE")
    [m] = active["members"]
    assert (m["client_id"], m["client_host"]) == ("sdk", "10.0.0.8")

    classic = asyncio.run(service.describe(None, "classic", None))
    assert (classic["type"], classic["state"], classic["group_epoch"]) == ("classic", "STABLE", 3)
    [m] = classic["members"]
    assert (m["client_id"], m["client_host"]) == ("rdkafka", "10.0.0.7")  # no leading "/"

    # a second member joins: the classic group prepares a rebalance (Kafka's state names)
    coordinator.shard.groups["classic"].join(
        1,
        member_id="",
        protocol_type="consumer",
        protocols=[("range", b"")],
        session_timeout_ms=10_000,
    )
    summaries = {s["group_id"]: s for s in asyncio.run(service.list_summaries(None, None))}
    assert {g: (s["type"], s["state"]) for g, s in summaries.items()} == {
        "active": ("consumer", "STABLE"),
        "classic": ("classic", "PREPARING_REBALANCE"),
    }


def test_bare_host():
    assert bare_host("/127.0.0.1") == "127.0.0.1" and bare_host("::1") == "::1"
    assert bare_host("") is None and bare_host(None) is None and bare_host("/") is None
