"""Kafka API handlers: the classic consumer-group protocol and offsets.

FindCoordinator v0-6, JoinGroup v0-9, SyncGroup v0-5, Heartbeat v0-4, LeaveGroup v0-5,
OffsetCommit v2-9, OffsetFetch v1-9 and DescribeGroups v0-5, over the group coordinator
(``coordinator/group_coordinator.py`` and its classic layer ``classic_requests.py``), so a
group's offsets are the ones REST and the console show. As on HTTP, the caller's key decides
the tenant and group ids are qualified within it; ACLs through ``ctx.authorize``: READ on the
group to join, sync, heartbeat, leave and commit (and READ on each committed topic, answered
per partition), DESCRIBE on the group to find its coordinator, fetch its offsets or describe
it. A group another broker coordinates answers NOT_COORDINATOR. Refusals are Kafka's codes;
an unauthenticated caller is not answered (the connection closes).
"""

from __future__ import annotations

from functools import partial

from brokernodes.errors import SluiceError, UnauthenticatedError
from brokernodes.groups import ConsumerGroup, GroupIdNotFoundError
from brokernodes.groups import consumer_protocol as cp
from brokernodes.groups.classic import ClassicGroup, ClassicState
from brokernodes.groups.types import TopicPartition
from brokernodes.server.coordinator.offsets_topic import qualify
from brokernodes.server.coordinator.service import GroupService
from brokernodes.server.http.log_offsets import log_offsets
from brokernodes.server.kafka import group_messages as gm
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.handlers.offset_commits import offsets_to_commit
from brokernodes.server.kafka.handlers.transactions import find_txn_coordinator
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.frames import RequestHeader

MAX_GROUP_ID = 249
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def _code(e: SluiceError) -> int:
    if isinstance(e, UnauthenticatedError):
        raise e
    return kerr.kafka_code(e)


def _check_group_id(group_id: str | None) -> str:
    if not group_id or len(group_id) > MAX_GROUP_ID:
        raise _InvalidGroupId(f"group ids are 1..{MAX_GROUP_ID} characters")
    return group_id


class _InvalidGroupId(SluiceError):
    error_code = "INVALID_GROUP_ID"


def _qualified(ctx: KafkaContext, operation: str, group_id: str) -> tuple[str | None, str]:
    """(tenant, qualified group id) once the caller may ``operation`` the group."""
    tenant = ctx.authorize(operation, "group", _check_group_id(group_id)).tenant
    return tenant, qualify(tenant, group_id)


def _service(ctx: KafkaContext) -> GroupService:
    return GroupService(ctx.broker.groups, partial(log_offsets, ctx.broker))


# --- FindCoordinator (10) --------------------------------------------------------------------


def _find(ctx: KafkaContext, key_type: int, key: str) -> dict:
    out = {"key": key, "node_id": -1, "host": "", "port": -1}
    try:
        if key_type == KEY_TYPE_TRANSACTION:
            return find_txn_coordinator(ctx, key)
        if key_type != KEY_TYPE_GROUP:
            return {
                **out,
                "error_code": kerr.INVALID_REQUEST,
                "error_message": f"unknown coordinator key type {key_type}",
            }
        _, qualified = _qualified(ctx, "DESCRIBE", key)
        c = ctx.broker.groups.coordinator(qualified)
        info = ctx.broker.metadata.global_image().brokers.get(c.broker_id)
        if c.broker_id < 0 or info is None or not info.kafka:
            return {
                **out,
                "error_code": kerr.COORDINATOR_NOT_AVAILABLE,
                "error_message": "the group's coordinator has no Kafka listener right now",
            }
        host, _, port = info.kafka.rpartition(":")
        return {
            **out,
            "node_id": c.broker_id,
            "host": host.strip("[]"),
            "port": int(port),
            "error_code": kerr.NONE,
            "error_message": None,
        }
    except SluiceError as e:
        return {**out, "error_code": _code(e), "error_message": e.message}


async def find_coordinator(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    key_type = request["key_type"]
    if header.api_version >= 4:
        found = [_find(ctx, key_type, key) for key in request["coordinator_keys"]]
        return {"throttle_time_ms": 0, "coordinators": found}
    r = _find(ctx, key_type, request["key"])
    return {
        "throttle_time_ms": 0,
        "error_code": r["error_code"],
        "error_message": r["error_message"],
        "node_id": r["node_id"],
        "host": r["host"],
        "port": r["port"],
    }


# --- JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13) ----------------------------


async def join_group(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    v = header.api_version
    member_id = request["member_id"] or ""
    answer = {
        "throttle_time_ms": 0,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }
    protocols = request["protocols"]
    try:
        _, qualified = _qualified(ctx, "READ", request["group_id"])
        r = await ctx.broker.groups.join_group(
            qualified,
            member_id=member_id,
            protocol_type=request["protocol_type"] or "",
            protocols=[(p["name"] or "", bytes(p["metadata"] or b"")) for p in protocols],
            session_timeout_ms=request["session_timeout_ms"],
            rebalance_timeout_ms=request["rebalance_timeout_ms"] if v >= 1 else -1,
            instance_id=request["group_instance_id"],
            client_id=header.client_id or "",
            client_host=gm.client_host(ctx.peer_host),
            require_known_member_id=v >= 4,
            supports_skip_assignment=v >= 9,
        )
    except SluiceError as e:
        return {**answer, "error_code": _code(e)}
    return {
        **answer,
        "error_code": kerr.code_for(r.error) if r.error else kerr.NONE,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "leader": r.leader,
        "skip_assignment": r.skip_assignment,
        "member_id": r.member_id,
        "members": [
            {"member_id": mid, "group_instance_id": iid, "metadata": meta}
            for mid, iid, meta in r.members
        ],
    }


async def sync_group(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    answer = {"throttle_time_ms": 0, "protocol_type": None, "protocol_name": None}
    try:
        _, qualified = _qualified(ctx, "READ", request["group_id"])
        r = await ctx.broker.groups.sync_group(
            qualified,
            member_id=request["member_id"] or "",
            generation_id=request["generation_id"],
            assignments=[
                (a["member_id"] or "", bytes(a["assignment"] or b""))
                for a in request["assignments"]
            ],
            instance_id=request["group_instance_id"],
            protocol_type=request["protocol_type"],
            protocol_name=request["protocol_name"],
        )
    except SluiceError as e:
        return {**answer, "error_code": _code(e), "assignment": b""}
    return {
        **answer,
        "error_code": kerr.code_for(r.error) if r.error else kerr.NONE,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment if not r.error else b"",
    }


async def heartbeat(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    try:
        _, qualified = _qualified(ctx, "READ", request["group_id"])
        await ctx.broker.groups.classic_heartbeat(
            qualified,
            member_id=request["member_id"] or "",
            generation_id=request["generation_id"],
            instance_id=request["group_instance_id"],
        )
    except SluiceError as e:
        return {"throttle_time_ms": 0, "error_code": _code(e)}
    return {"throttle_time_ms": 0, "error_code": kerr.NONE}


async def leave_group(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    batch = header.api_version >= 3
    if batch:
        leaving = [(m["member_id"] or "", m["group_instance_id"]) for m in request["members"]]
    else:
        leaving = [(request["member_id"] or "", None)]
    try:
        _, qualified = _qualified(ctx, "READ", request["group_id"])
        results = await ctx.broker.groups.leave_group(qualified, leaving)
    except SluiceError as e:
        return {"throttle_time_ms": 0, "error_code": _code(e), "members": []}
    members = [
        {
            "member_id": mid,
            "group_instance_id": iid,
            "error_code": kerr.code_for(err) if err else kerr.NONE,
        }
        for mid, iid, err in results
    ]
    top = kerr.NONE if batch else members[0]["error_code"]
    return {"throttle_time_ms": 0, "error_code": top, "members": members}


# --- OffsetCommit (8) ------------------------------------------------------------------------


async def offset_commit(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """Per partition: TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION and
    OFFSET_METADATA_TOO_LARGE are checked first; the valid partitions are committed together
    and share the commit's answer (the group's checks: generation or member epoch)."""
    answers: dict[tuple[str, int], int] = {}
    order = [(t["name"], p["partition_index"]) for t in request["topics"] for p in t["partitions"]]
    try:
        tenant, qualified = _qualified(ctx, "READ", request["group_id"])
    except SluiceError as e:
        code = _code(e)
        return _commit_answer(order, dict.fromkeys(order, code))
    groups = ctx.broker.groups
    offsets = offsets_to_commit(ctx, tenant, request["topics"], answers)
    if offsets:
        generation = request["generation_id_or_member_epoch"]
        member_id = request["member_id"] or None
        instance_id = request["group_instance_id"]
        code = kerr.NONE
        try:
            if generation < 0 and instance_id is None:
                # a standalone commit (no group membership), checked against the log ends
                await _service(ctx).commit(
                    tenant, request["group_id"], None, -1, offsets, ctx.auth_header
                )
            else:
                await groups.commit(
                    qualified, member_id, generation, offsets, None, instance_id=instance_id
                )
        except GroupIdNotFoundError as e:
            # Kafka: a member commit to a group that does not exist; before v9 (KIP-848)
            # clients expect ILLEGAL_GENERATION
            code = _code(e) if header.api_version >= 9 else kerr.ILLEGAL_GENERATION
        except SluiceError as e:
            code = _code(e)
        for tp in offsets:
            answers[(tp.topic, tp.partition)] = code
    return _commit_answer(order, answers)


def _commit_answer(order: list[tuple[str, int]], answers: dict[tuple[str, int], int]) -> dict:
    topics: dict[str, list[dict]] = {}
    for name, partition in order:
        topics.setdefault(name, []).append(
            {"partition_index": partition, "error_code": answers.get((name, partition), 0)}
        )
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
    }


# --- OffsetFetch (9) -------------------------------------------------------------------------


async def _fetch_group(ctx: KafkaContext, group_id: str, topics: list[dict] | None) -> dict:
    """One group's OffsetFetch answer: ``{"topics", "error_code"}``. ``topics`` None: every
    committed offset of topics the caller may describe."""
    try:
        _, qualified = _qualified(ctx, "DESCRIBE", group_id)
        wanted = None
        if topics is not None:
            wanted = [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
        found = await ctx.broker.groups.fetch_offsets(qualified, wanted)
    except SluiceError as e:
        return {"topics": [], "error_code": _code(e)}
    allowed: dict[str, bool] = {}

    def may_describe(topic: str) -> bool:
        if topic not in allowed:
            try:
                ctx.authorize("DESCRIBE", "topic", topic)
                allowed[topic] = True
            except UnauthenticatedError:
                raise
            except SluiceError:
                allowed[topic] = False
        return allowed[topic]

    rows: dict[str, list[dict]] = {}
    tps = wanted if wanted is not None else sorted(found)
    for tp in tps:
        ok = may_describe(tp.topic)
        if not ok and wanted is None:
            continue
        om = found.get(tp) if ok else None
        rows.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "committed_offset": om.offset if om else -1,
                "committed_leader_epoch": om.leader_epoch
                if om and om.leader_epoch is not None
                else -1,
                "metadata": om.metadata if om else "",
                "error_code": kerr.NONE if ok else kerr.TOPIC_AUTHORIZATION_FAILED,
            }
        )
    return {
        "topics": [{"name": n, "partitions": ps} for n, ps in rows.items()],
        "error_code": kerr.NONE,
    }


async def offset_fetch(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    v = header.api_version
    if v >= 8:
        groups = []
        for g in request["groups"]:
            r = await _fetch_group(ctx, g["group_id"], g["topics"])
            groups.append({"group_id": g["group_id"], **r})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = request["topics"]
    r = await _fetch_group(ctx, request["group_id"], topics)
    if v < 2 and r["error_code"]:
        # v1 has no group-level error: every asked partition carries it
        r["topics"] = [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": r["error_code"],
                    }
                    for p in t["partition_indexes"]
                ],
            }
            for t in topics or []
        ]
    return {"throttle_time_ms": 0, "topics": r["topics"], "error_code": r["error_code"]}


# --- DescribeGroups (15) ---------------------------------------------------------------------


def group_operations(ctx: KafkaContext, group_id: str) -> int:
    """The group operations the caller may perform, as Kafka's authorized-operations bits."""
    allowed = []
    for op in gm.GROUP_OPERATIONS:
        try:
            ctx.authorize(op, "group", group_id, count=False)
        except UnauthenticatedError:
            raise
        except SluiceError:
            continue
        allowed.append(op)
    return gm.authorized_operations(allowed)


def _classic_described(group: ClassicGroup) -> tuple[str, str, str, list[dict]]:
    stable = group.state is ClassicState.STABLE
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": m.metadata(group.protocol_name) if stable else b"",
            "member_assignment": m.assignment if stable else b"",
        }
        for m in group.members.values()
    ]
    protocol = (group.protocol_name or "") if stable else ""
    return group.state.value, group.protocol_type or "", protocol, members


def _consumer_described(
    service: GroupService, tenant: str | None, group_id: str, group: ConsumerGroup
) -> tuple[str, str, str, list[dict]]:
    """A KIP-848 group as DescribeGroups shows it: the consumer protocol's bytes built from
    each member's subscriptions and assignment."""
    members = []
    for m in group.members.values():
        client_id, host = service.member_client(tenant, group_id, m.member_id)
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": client_id or "",
                "client_host": gm.client_host(host),
                "member_metadata": cp.encode_subscription(sorted(m.subscriptions), m.assigned),
                "member_assignment": cp.encode_assignment(m.assigned),
            }
        )
    state = group.state.value.capitalize()
    return state, cp.PROTOCOL_TYPE, group.assignor, members


async def _describe(ctx: KafkaContext, group_id: str, with_operations: bool) -> dict:
    tenant, qualified = _qualified(ctx, "DESCRIBE", group_id)
    shard = await ctx.broker.groups.shard_for(qualified)
    group = shard.groups.get(qualified)
    if isinstance(group, ClassicGroup):
        state, ptype, protocol, members = _classic_described(group)
    elif isinstance(group, ConsumerGroup):
        state, ptype, protocol, members = _consumer_described(
            _service(ctx), tenant, group_id, group
        )
    elif shard.offsets.fetch(qualified):  # only committed offsets: Kafka's simple group
        state, ptype, protocol, members = "Empty", "", "", []
    else:
        state, ptype, protocol, members = "Dead", "", "", []
    return {
        "error_code": kerr.NONE,
        "group_id": group_id,
        "group_state": state,
        "protocol_type": ptype,
        "protocol_data": protocol,
        "members": members,
        "authorized_operations": group_operations(ctx, group_id)
        if with_operations
        else gm.AUTHORIZED_OPERATIONS_OMITTED,
    }


async def describe_groups(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    out = []
    for group_id in request["groups"]:
        try:
            out.append(await _describe(ctx, group_id, request["include_authorized_operations"]))
        except SluiceError as e:
            out.append(
                {
                    "error_code": _code(e),
                    "group_id": group_id,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
            )
    return {"throttle_time_ms": 0, "groups": out}


HANDLERS: dict[int, Handler] = {
    apis.FIND_COORDINATOR: find_coordinator,
    apis.JOIN_GROUP: join_group,
    apis.SYNC_GROUP: sync_group,
    apis.HEARTBEAT: heartbeat,
    apis.LEAVE_GROUP: leave_group,
    apis.OFFSET_COMMIT: offset_commit,
    apis.OFFSET_FETCH: offset_fetch,
    apis.DESCRIBE_GROUPS: describe_groups,
}
