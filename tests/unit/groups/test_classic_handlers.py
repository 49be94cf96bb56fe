"""The classic group handlers (``server/kafka/handlers/classic_groups.py``) over a real
``GroupCoordinator`` with a stand-in ``__consumer_offsets`` partition and a stand-in context:
requests decoded by our codec at every version, answers encoded back at that version, every
refusal as Kafka's code (authorization per group and per partition, NOT_COORDINATOR, bad
group ids, transactions), and hostile values."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from brokernodes.errors import SluiceError
from brokernodes.groups import ConsumerGroup, TopicPartition
from brokernodes.groups import consumer_protocol as cp
from brokernodes.groups.classic import ClassicConfig
from brokernodes.server.auth import (
    GroupAuthorizationFailedError,
    Principal,
    TopicAuthorizationFailedError,
)
from brokernodes.server.coordinator.group_coordinator import GroupCoordinator, Shard
from brokernodes.server.coordinator.offsets_topic import partition_for
from brokernodes.server.kafka.handlers import classic_groups as h
from brokernodes.server.kafka.handlers import offset_commits
from brokernodes.server.metadata.cluster import parse_metadata
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.transactions.coordinator import TransactionCoordinator

IMAGE = parse_metadata(
    {
        "cluster_id": "c",
        "broker_id": 1,
        "brokers": [
            {"id": 1, "url": "http://a:1", "kafka": "127.0.0.1:9092"},
            {"id": 2, "url": "http://b:1", "kafka": "10.0.0.2:9093"},
        ],
        "topics": [
            {"name": "orders", "partitions": 3, "leaders": [1, 1, 1]},
            {
                "name": "__consumer_offsets",
                "partitions": 2,
                "leaders": [1, 2],
                "configs": {"cleanup.policy": "compact"},
            },
        ],
    }
)
HERE = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 2) == 0)
ELSEWHERE = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 2) == 1)


class FakePartition:
    is_leader = True

    async def append_as_leader(self, buf, acks):
        return None


class Context:
    def __init__(self, coordinator, denied=()) -> None:
        self.broker = SimpleNamespace(groups=coordinator, metadata=coordinator.metadata)
        self.denied = set(denied)
        self.peer_host = "127.0.0.1"
        self.auth_header = None

    def authorize(self, op, rtype="cluster", name="", count=True):
        if (op, rtype, name) in self.denied:
            error = GroupAuthorizationFailedError if rtype == "group" else None
            raise (error or TopicAuthorizationFailedError)(f"may not {op} {rtype} {name}")
        return Principal("User:test", "k", None)


@pytest.fixture
def coord(monkeypatch):
    metadata = SimpleNamespace(global_image=lambda: IMAGE, current=lambda: IMAGE)
    c = GroupCoordinator(metadata, None, ClassicConfig(initial_rebalance_delay_ms=50))
    shard = Shard(0, 0)
    shard.loaded.set()
    c.shards[0] = shard
    monkeypatch.setattr(c, "_partition", lambda _image, _n: FakePartition())
    return c


def call(handler, ctx, api: int, version: int, fields: dict, client_id: str = "cli") -> dict:
    """Encode ``fields`` as the request at ``version``, decode it as the broker does, run
    the handler, and encode its answer at that version (it must be encodable)."""
    codec = apis.request_codec(api, version)
    request = codec.decode_all(codec.encode_new(fields))
    header = SimpleNamespace(api_version=version, client_id=client_id)
    answer = asyncio.run(handler(ctx, header, request))
    apis.response_codec(api, version).encode_new(answer)
    return answer


# --- FindCoordinator -----------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_names_the_kafka_address(coord, version):
    a = call(h.find_coordinator, Context(coord), apis.FIND_COORDINATOR, version, {"key": HERE})
    assert (a["error_code"], a["node_id"], a["host"], a["port"]) == (0, 1, "127.0.0.1", 9092)
    a = call(h.find_coordinator, Context(coord), apis.FIND_COORDINATOR, version, {"key": ELSEWHERE})
    assert (a["node_id"], a["host"], a["port"]) == (2, "10.0.0.2", 9093)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched(coord, version):
    ctx = Context(coord, denied=[("DESCRIBE", "group", "secret")])
    a = call(
        h.find_coordinator,
        ctx,
        apis.FIND_COORDINATOR,
        version,
        {"key_type": 0, "coordinator_keys": [HERE, ELSEWHERE, "secret", ""]},
    )
    by_key = {c["key"]: c for c in a["coordinators"]}
    assert by_key[HERE]["node_id"] == 1 and by_key[ELSEWHERE]["port"] == 9093
    assert by_key["secret"]["error_code"] == kerr.GROUP_AUTHORIZATION_FAILED
    assert by_key[""]["error_code"] == kerr.INVALID_GROUP_ID
    # key type 1 asks the transaction coordinator: this image has no __transaction_state
    ctx.broker.transactions = TransactionCoordinator(coord.metadata, None, coord, None)
    txn = call(
        h.find_coordinator,
        ctx,
        apis.FIND_COORDINATOR,
        version,
        {"key_type": 1, "coordinator_keys": ["tx"]},
    )
    (answer,) = txn["coordinators"]
    assert answer["error_code"] == kerr.COORDINATOR_NOT_AVAILABLE
    assert "__transaction_state" in answer["error_message"]


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------------------------------


def join_fields(group: str = HERE, member_id: str = "", **extra) -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 5_000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": cp.encode_subscription(["orders"])}],
        **extra,
    }


def call_timed(handler, ctx, coord, api: int, version: int, fields: dict) -> dict:
    """``call`` with the coordinator's timer running (a join parks until its phase ends)."""
    codec = apis.request_codec(api, version)
    request = codec.decode_all(codec.encode_new(fields))
    header = SimpleNamespace(api_version=version, client_id="cli")

    async def go():
        timer = asyncio.create_task(coord._timer())
        try:
            return await asyncio.wait_for(handler(ctx, header, request), 10)
        finally:
            timer.cancel()

    answer = asyncio.run(go())
    apis.response_codec(api, version).encode_new(answer)
    return answer


@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_at_every_version(coord, version):
    ctx = Context(coord)
    joined = call_timed(h.join_group, ctx, coord, apis.JOIN_GROUP, version, join_fields())
    if version >= 4:  # the member id first, then the join
        assert joined["error_code"] == kerr.MEMBER_ID_REQUIRED and joined["member_id"]
        fields = join_fields(member_id=joined["member_id"])
        joined = call_timed(h.join_group, ctx, coord, apis.JOIN_GROUP, version, fields)
    assert joined["error_code"] == 0 and joined["generation_id"] == 1
    me = joined["member_id"]
    assert joined["leader"] == me and [m["member_id"] for m in joined["members"]] == [me]
    sync_version = min(version, 5)
    assignment = cp.encode_assignment([TopicPartition("orders", 0)])
    synced = call(
        h.sync_group,
        ctx,
        apis.SYNC_GROUP,
        sync_version,
        {
            "group_id": HERE,
            "generation_id": 1,
            "member_id": me,
            "assignments": [{"member_id": me, "assignment": assignment}],
        },
    )
    assert synced["error_code"] == 0 and synced["assignment"] == assignment
    hb_version = min(version, 4)
    hb = {"group_id": HERE, "generation_id": 1, "member_id": me}
    assert call(h.heartbeat, ctx, apis.HEARTBEAT, hb_version, hb)["error_code"] == 0
    stale = {**hb, "generation_id": 0}
    assert call(h.heartbeat, ctx, apis.HEARTBEAT, hb_version, stale)["error_code"] == (
        kerr.ILLEGAL_GENERATION
    )
    leave_version = min(version, 5)
    if leave_version >= 3:
        fields = {"group_id": HERE, "members": [{"member_id": me}, {"member_id": "ghost"}]}
        left = call(h.leave_group, ctx, apis.LEAVE_GROUP, leave_version, fields)
        assert left["error_code"] == 0
        assert [m["error_code"] for m in left["members"]] == [0, kerr.UNKNOWN_MEMBER_ID]
    else:
        fields = {"group_id": HERE, "member_id": me}
        assert call(h.leave_group, ctx, apis.LEAVE_GROUP, leave_version, fields)["error_code"] == 0
    assert call(h.heartbeat, ctx, apis.HEARTBEAT, hb_version, hb)["error_code"] == (
        kerr.UNKNOWN_MEMBER_ID
    )


def test_join_refusals(coord):
    ctx = Context(coord, denied=[("READ", "group", "locked")])
    cases = [
        (join_fields("locked"), kerr.GROUP_AUTHORIZATION_FAILED),
        (join_fields(""), kerr.INVALID_GROUP_ID),
        (join_fields("x" * 300), kerr.INVALID_GROUP_ID),
        (join_fields(ELSEWHERE), kerr.NOT_COORDINATOR),
        (join_fields(session_timeout_ms=-5), kerr.INVALID_SESSION_TIMEOUT),
        (join_fields(protocols=[]), kerr.INCONSISTENT_GROUP_PROTOCOL),
        (join_fields(protocol_type=""), kerr.INCONSISTENT_GROUP_PROTOCOL),
        (
            join_fields(protocols=[{"name": "range", "metadata": b"x" * (300 * 1024)}]),
            kerr.INVALID_REQUEST,
        ),
        (join_fields(member_id="never-joined"), kerr.UNKNOWN_MEMBER_ID),
    ]
    for fields, code in cases:
        a = call(h.join_group, ctx, apis.JOIN_GROUP, 7, fields)
        assert a["error_code"] == code, fields["group_id"][:10]
        assert a["generation_id"] == -1 and a["members"] == []


def test_a_consumer_group_with_members_refuses_classic_members(coord):
    busy = ConsumerGroup(HERE)
    busy.heartbeat(None, 0, 0, subscriptions=["orders"])
    coord.shards[0].groups[HERE] = busy
    a = call(h.join_group, Context(coord), apis.JOIN_GROUP, 9, join_fields())
    assert a["error_code"] == kerr.INCONSISTENT_GROUP_PROTOCOL
    sync = {"group_id": HERE, "generation_id": 1, "member_id": "m"}
    assert call(h.sync_group, Context(coord), apis.SYNC_GROUP, 5, sync)["error_code"] == (
        kerr.INCONSISTENT_GROUP_PROTOCOL
    )


# --- OffsetCommit, OffsetFetch ----------------------------------------------------------------


def commit_fields(generation: int, member_id: str, *partitions, topic="orders", **extra) -> dict:
    return {
        "group_id": HERE,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": m}
                    for p, o, m in partitions
                ],
            }
        ],
        **extra,
    }


def errors(answer) -> dict:
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in answer["topics"]
        for p in t["partitions"]
    }


def stable_member(coord) -> str:
    """One member in generation 1 of HERE (joined and synced through the coordinator)."""

    async def go():
        t = asyncio.create_task(coord._timer())
        try:
            first = await coord.join_group(
                f"{HERE}",
                member_id="",
                protocol_type="consumer",
                protocols=[("range", b"")],
                session_timeout_ms=10_000,
            )
            j = await coord.join_group(
                HERE,
                member_id=first.member_id,
                protocol_type="consumer",
                protocols=[("range", b"")],
                session_timeout_ms=10_000,
            )
            await coord.sync_group(HERE, member_id=j.member_id, generation_id=1)
            return j.member_id
        finally:
            t.cancel()

    return asyncio.run(go())


@pytest.mark.parametrize("version", [2, 5, 8, 9])
def test_offset_commit_per_partition_errors_and_fetch_shapes(coord, version):
    me = stable_member(coord)
    ctx = Context(coord, denied=[("READ", "topic", "hidden")])
    big = "m" * 5000
    a = call(
        h.offset_commit,
        ctx,
        apis.OFFSET_COMMIT,
        version,
        commit_fields(1, me, (0, 5, "a"), (1, 7, None), (7, 1, None), (2, 3, big)),
    )
    assert errors(a) == {
        ("orders", 0): 0,
        ("orders", 1): 0,
        ("orders", 7): kerr.UNKNOWN_TOPIC_OR_PARTITION,
        ("orders", 2): offset_commits.OFFSET_METADATA_TOO_LARGE,
    }
    hidden = call(
        h.offset_commit,
        ctx,
        apis.OFFSET_COMMIT,
        version,
        commit_fields(1, me, (0, 1, ""), topic="hidden"),
    )
    assert errors(hidden) == {("hidden", 0): kerr.TOPIC_AUTHORIZATION_FAILED}
    stale = call(
        h.offset_commit, ctx, apis.OFFSET_COMMIT, version, commit_fields(0, me, (0, 9, ""))
    )
    assert errors(stale) == {("orders", 0): kerr.ILLEGAL_GENERATION}
    zombie = call(
        h.offset_commit, ctx, apis.OFFSET_COMMIT, version, commit_fields(1, "z", (0, 9, ""))
    )
    assert errors(zombie) == {("orders", 0): kerr.UNKNOWN_MEMBER_ID}
    denied = Context(coord, denied=[("READ", "group", HERE)])
    refused = call(
        h.offset_commit, denied, apis.OFFSET_COMMIT, version, commit_fields(1, me, (0, 9, ""))
    )
    assert errors(refused) == {("orders", 0): kerr.GROUP_AUTHORIZATION_FAILED}
    # and back through OffsetFetch, in each version's shape
    for fv in (1, 2, 7, 8, 9):
        wanted = [{"name": "orders", "partition_indexes": [0, 1, 2]}]
        if fv >= 8:
            got = call(
                h.offset_fetch,
                ctx,
                apis.OFFSET_FETCH,
                fv,
                {"groups": [{"group_id": HERE, "topics": wanted}, {"group_id": ELSEWHERE}]},
            )
            mine, other = got["groups"]
            assert other["error_code"] == kerr.NOT_COORDINATOR
            topics = mine["topics"]
        else:
            got = call(
                h.offset_fetch, ctx, apis.OFFSET_FETCH, fv, {"group_id": HERE, "topics": wanted}
            )
            topics = got["topics"]
        rows = {p["partition_index"]: p for p in topics[0]["partitions"]}
        assert rows[0]["committed_offset"] == 5 and rows[0]["metadata"] == "a"
        assert rows[1]["committed_offset"] == 7 and rows[2]["committed_offset"] == -1


def test_commit_to_a_group_that_does_not_exist(coord):
    ctx = Context(coord)
    for version, code in ((8, kerr.ILLEGAL_GENERATION), (9, kerr.GROUP_ID_NOT_FOUND)):
        a = call(
            h.offset_commit, ctx, apis.OFFSET_COMMIT, version, commit_fields(3, "m", (0, 1, ""))
        )
        assert errors(a) == {("orders", 0): code}


# --- DescribeGroups ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 6))
def test_describe_groups(coord, version):
    me = stable_member(coord)
    ctx = Context(coord, denied=[("DESCRIBE", "group", "locked")])
    fields = {"groups": [HERE, "nothing-here", "locked", ELSEWHERE]}
    if version >= 3:
        fields["include_authorized_operations"] = True
    got = call(h.describe_groups, ctx, apis.DESCRIBE_GROUPS, version, fields)
    mine, missing, locked, elsewhere = got["groups"]
    assert (mine["group_state"], mine["protocol_type"], mine["protocol_data"]) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [m["member_id"] for m in mine["members"]] == [me]
    assert mine["members"][0]["client_host"] == ""
    if version >= 3:
        assert mine["authorized_operations"] > 0
    assert missing["group_state"] == "Dead" and missing["error_code"] == 0
    assert locked["error_code"] == kerr.GROUP_AUTHORIZATION_FAILED
    assert elsewhere["error_code"] == kerr.NOT_COORDINATOR


def test_describe_a_kip848_group_as_consumer_protocol_bytes(coord):
    group = ConsumerGroup(HERE, partition_counts={"orders": 3})
    r = group.heartbeat(None, 0, 0, subscriptions=["orders"])
    coord.shards[0].groups[HERE] = group
    got = call(h.describe_groups, Context(coord), apis.DESCRIBE_GROUPS, 5, {"groups": [HERE]})
    (described,) = got["groups"]
    assert described["protocol_type"] == "consumer" and described["group_state"] == "Stable"
    (m,) = described["members"]
    assert m["member_id"] == r.member_id
    assert cp.decode_subscription(m["member_metadata"]).topics == ("orders",)
    assert cp.assigned_partitions(m["member_assignment"]) == sorted(r.assignment)


def test_unknown_errors_never_escape(coord, monkeypatch):
    async def boom(*_a, **_k):
        raise SluiceError("disk on fire")

    monkeypatch.setattr(coord, "join_group", boom)
    a = call(h.join_group, Context(coord), apis.JOIN_GROUP, 9, join_fields())
    assert a["error_code"] == kerr.UNKNOWN_SERVER_ERROR


class TenantContext(Context):
    def authorize(self, op, rtype="cluster", name="", count=True):
        super().authorize(op, rtype, name)
        return Principal("User:test", "k", "acme")


def test_groups_are_qualified_by_the_callers_tenant(coord):
    """The same group id in another tenant is another group: keys are ``<tenant>/<group>``
    (and may live in another ``__consumer_offsets`` partition)."""
    qualified = next(f"acme/t{i}" for i in range(100) if partition_for(f"acme/t{i}", 2) == 0)
    name = qualified.split("/", 1)[1]
    ctx = TenantContext(coord)
    first = call(h.join_group, ctx, apis.JOIN_GROUP, 9, join_fields(name))
    assert first["error_code"] == kerr.MEMBER_ID_REQUIRED
    assert set(coord.shards[0].groups) == {qualified}
    found = call(h.find_coordinator, ctx, apis.FIND_COORDINATOR, 3, {"key": name})
    assert found["node_id"] == 1
    other = call(h.describe_groups, Context(coord), apis.DESCRIBE_GROUPS, 5, {"groups": [name]})
    assert other["groups"][0]["group_state"] in ("Dead", "")  # not visible without the tenant
