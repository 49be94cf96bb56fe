"""Consumer groups over HTTP: heartbeat (KIP-848), offset commit/fetch, find coordinator,
list, describe with lag, delete and offset resets; plus the internal routes the control
plane and other brokers use (``/internal/v1/...``, cluster secret).

Group names are tenant-scoped: the caller's API key decides the tenant (``authorize``), and
the coordinator keys the group as ``<tenant>/<group>``. ACLs: READ on the group to heartbeat
and commit (and READ on each committed topic), DESCRIBE to describe or fetch offsets, DELETE
to delete or reset (a reset rewrites the group's offsets; Kafka's tool needs READ; Sluice
asks DELETE since it discards progress).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from brokernodes.errors import InvalidRequestError, SluiceError
from brokernodes.groups import (
    NonEmptyGroupError,
    OffsetAndMetadata,
    PartitionOffsets,
    ResetSpec,
    TopicPartition,
    plan_reset,
)
from brokernodes.groups.lag import offset_lag, time_lag_ms
from brokernodes.server.coordinator import lag_metrics
from brokernodes.server.coordinator.group_coordinator import now_ms, session_timeout
from brokernodes.server.coordinator.offsets_topic import qualify, unqualify
from brokernodes.server.http.body import read_body
from brokernodes.server.http.log_offsets import Query, answer_internal, check_internal, log_offsets
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol.json_records import parse_json

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

MAX_GROUP_ID = 249
HEALTH_WARN_MS = 10_000
HEALTH_ERR_MS = 60_000
HEALTH_STALL_MS = 300_000
STRATEGIES = ("earliest", "latest", "offset", "datetime", "shift-by", "by-duration", "offsets")


# --- parsing (pure) ---------------------------------------------------------------------


def group_id_of(request: web.Request) -> str:
    gid = request.match_info["group"]
    if not gid or len(gid) > MAX_GROUP_ID or any(ord(c) < 32 for c in gid):
        raise InvalidRequestError(
            f"group ids are 1..{MAX_GROUP_ID} printable characters, got {gid[:40]!r}"
        )
    return gid


def _int(doc: Mapping, name: str, default: Any = ..., *, minimum: int | None = None) -> Any:
    if name not in doc or doc[name] is None:
        if default is ...:
            raise InvalidRequestError(f"body.{name}: required")
        return default
    v = doc[name]
    if not isinstance(v, int) or isinstance(v, bool):
        raise InvalidRequestError(f"body.{name}: expected an integer")
    if minimum is not None and v < minimum:
        raise InvalidRequestError(f"body.{name}: must be >= {minimum}, got {v}")
    return v


def _str(doc: Mapping, name: str) -> str | None:
    v = doc.get(name)
    if v is not None and not isinstance(v, str):
        raise InvalidRequestError(f"body.{name}: expected a string")
    return v or None


def _tps(value: Any, where: str) -> list[TopicPartition] | None:
    """``[{"topic", "partition"}, ...]`` (or ``[[topic, partition]]``) -> partitions."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: expected a list of {{topic, partition}}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            topic, partition = item.get("topic"), item.get("partition")
        elif isinstance(item, list) and len(item) == 2:
            topic, partition = item
        else:
            topic = partition = None
        if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
            raise InvalidRequestError(f"{where}[{i}]: expected {{topic, partition >= 0}}")
        out.append(TopicPartition(topic, partition))
    return out


def tp_json(tps) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p} for t, p in sorted(tps)]


def heartbeat_json(r) -> dict[str, object]:
    return {
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval_ms": r.heartbeat_interval_ms,
        "assignment": tp_json(r.assignment),
        "revoking": tp_json(r.revoking),
        "pending": tp_json(r.pending),
    }


def health(members: int, total_lag: int, max_time_lag: int | None, has_offsets: bool) -> str:
    """Burrow-like status: EMPTY/STOP without members, else by how old the next record is."""
    if members == 0:
        return "STOP" if total_lag > 0 else "EMPTY"
    t = max_time_lag or 0
    if total_lag > 0 and t >= HEALTH_STALL_MS:
        return "STALL"
    if t >= HEALTH_ERR_MS:
        return "ERR"
    if t >= HEALTH_WARN_MS:
        return "WARN"
    return "OK"


def reset_spec(doc: Mapping) -> ResetSpec:
    strategy = doc.get("strategy")
    value = doc.get("value")
    if strategy not in STRATEGIES:
        raise InvalidRequestError(f"body.strategy: must be one of {', '.join(STRATEGIES)}")
    if strategy == "earliest":
        return ResetSpec.to_earliest()
    if strategy == "latest":
        return ResetSpec.to_latest()
    if strategy == "by-duration":
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise InvalidRequestError("body.value: a duration like PT1H or milliseconds")
        return ResetSpec.by_duration(value)
    if strategy == "datetime":
        if isinstance(value, str):
            from brokernodes.server.protocol.json_records import parse_timestamp

            value = parse_timestamp(value, "body.value")
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidRequestError("body.value: RFC 3339 text or epoch milliseconds")
        return ResetSpec.to_datetime(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequestError(f"body.value: strategy {strategy} needs an integer")
    if strategy == "offset":
        if value < 0:
            raise InvalidRequestError("body.value: offsets are >= 0")
        return ResetSpec.to_offset(value)
    return ResetSpec.shift_by(value)


# --- operations shared by the public and internal routes --------------------------------


async def describe(broker: Broker, tenant: str | None, group_id: str, auth: str | None) -> dict:
    """The group, its members, and per partition committed offset, log end and lag."""
    coordinator = broker.groups
    qualified = qualify(tenant, group_id)
    group, offsets = await coordinator.group(qualified)
    root = broker.metadata.global_image()
    view = root if tenant is None else root.for_tenant(tenant)
    tps = set(offsets)
    if group is not None:
        for topic in group.subscribed_topics():
            if topic in view.topics:
                tps.update(
                    TopicPartition(topic, p) for p in range(len(view.topics[topic].partitions))
                )
    queries = [
        Query(tp.topic, tp.partition, timestamp_at=offsets[tp].offset if tp in offsets else None)
        for tp in tps
    ]
    ends = await log_offsets(broker, view, queries, auth)
    now = now_ms()
    rows = []
    for tp in sorted(tps):
        committed = offsets[tp].offset if tp in offsets else None
        lo = ends.get((tp.topic, tp.partition))
        end = lo.high_watermark if lo else None
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": committed,
                "log_end_offset": end,
                "lag": None if end is None else offset_lag(committed, end),
                "time_lag_ms": None
                if end is None
                else time_lag_ms(committed, end, lambda _o, lo=lo: lo.timestamp, now),
                "metadata": offsets[tp].metadata if tp in offsets else None,
            }
        )
    members = []
    desc = group.describe() if group is not None else {}
    for m in desc.get("members", []):
        members.append(
            {
                "member_id": m["member_id"],
                "client_id": coordinator.client_ids.get((qualified, m["member_id"])),
                "instance_id": m["instance_id"],
                "member_epoch": m["member_epoch"],
                "state": m["state"],
                "subscriptions": m["subscriptions"],
                "assignments": [{"topic": t, "partition": p} for t, p in m["assignment"]],
                "revoking": [{"topic": t, "partition": p} for t, p in m["revoking"]],
            }
        )
    total = sum(r["lag"] or 0 for r in rows)
    times = [r["time_lag_ms"] for r in rows if r["time_lag_ms"] is not None]
    max_time = max(times, default=None)
    c = coordinator.coordinator(qualified)
    state = desc.get("state", "empty")
    return {
        "group_id": group_id,
        "state": str(state).upper(),
        "coordinator": c.broker_id,
        "group_epoch": desc.get("group_epoch", 0),
        "assignor": desc.get("assignor"),
        "members": members,
        "offsets": rows,
        "total_lag": total,
        "max_time_lag_ms": max_time,
        "health": health(len(members), total, max_time, bool(offsets)),
    }


def _require_inactive(group) -> None:
    if group is not None and not group.is_empty:
        raise NonEmptyGroupError(
            f"the group has {len(group.members)} member(s); offsets can be reset only while "
            "it is inactive: stop its consumers first"
        )


async def reset_offsets(
    broker: Broker, tenant: str | None, group_id: str, doc: Mapping, auth: str | None
) -> dict:
    """Plan (dry run) or apply an offset reset; the answer lists per partition the current
    and target offsets, so a dry run shows exactly what applying does."""
    if not isinstance(doc, dict):
        raise InvalidRequestError("body: expected a JSON object")
    dry_run = doc.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise InvalidRequestError("body.dry_run: expected true or false")
    qualified = qualify(tenant, group_id)
    coordinator = broker.groups
    shard = await coordinator.shard_for(qualified)
    group = shard.groups.get(qualified)
    root = broker.metadata.global_image()
    view = root if tenant is None else root.for_tenant(tenant)
    committed = shard.offsets.fetch(qualified)
    if doc.get("strategy") == "offsets":  # explicit offsets: the undo of an earlier reset
        targets = {}
        deletes = []
        for i, item in enumerate(doc.get("offsets") or []):
            (tp,) = _tps([item], f"body.offsets[{i}]") or []
            off = item.get("offset")
            if off is None:
                deletes.append(tp)
            elif isinstance(off, int) and not isinstance(off, bool) and off >= 0:
                targets[tp] = off
            else:
                raise InvalidRequestError(f"body.offsets[{i}].offset: an offset >= 0 or null")
        _require_inactive(group)
        plan_rows = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "current": committed[tp].offset if tp in committed else None,
                "target": targets.get(tp),
                "delta": None
                if tp not in committed or tp not in targets
                else targets[tp] - committed[tp].offset,
            }
            for tp in sorted(set(targets) | set(deletes))
        ]
        if not dry_run:
            await coordinator.apply_offsets(
                qualified, targets, deletes, check_empty=_require_inactive
            )
        return {"plan": plan_rows, "applied": not dry_run}
    spec = reset_spec(doc)
    topic = doc.get("topic")
    if not isinstance(topic, str):
        raise InvalidRequestError("body.topic: the topic whose offsets to reset")
    info = view.topic(topic)
    parts = doc.get("partitions")
    if parts is None:
        numbers = list(range(len(info.partitions)))
    elif isinstance(parts, list) and all(
        isinstance(p, int) and not isinstance(p, bool) for p in parts
    ):
        numbers = sorted(set(parts))
        for p in numbers:
            view.partition(topic, p)
    else:
        raise InvalidRequestError("body.partitions: a list of partition numbers, or null")
    now = now_ms()
    ts = None
    if spec.strategy.value == "to-datetime":
        ts = spec.value
    elif spec.strategy.value == "by-duration":
        ts = now - spec.value
    ends = await log_offsets(broker, view, [Query(topic, p, offset_at=ts) for p in numbers], auth)
    partitions = {}
    for p in numbers:
        lo = ends.get((topic, p))
        if lo is None:
            raise SluiceError(f"the leader of {topic}-{p} did not answer; retry shortly")
        tp = TopicPartition(topic, p)
        partitions[tp] = PartitionOffsets(
            lo.log_start_offset,
            lo.high_watermark,
            committed[tp].offset if tp in committed else None,
        )

    def offset_for_timestamp(tp: TopicPartition, _ts: int) -> int | None:
        lo = ends[(tp.topic, tp.partition)]
        return lo.offset_for_time

    plan = plan_reset(group_id, group, spec, partitions, offset_for_timestamp, now)
    if not dry_run:
        await coordinator.apply_offsets(qualified, plan.offsets(), check_empty=_require_inactive)
    return {
        "plan": [
            {
                "topic": e.tp.topic,
                "partition": e.tp.partition,
                "current": e.previous,
                "target": e.new,
                "delta": None if e.previous is None else e.new - e.previous,
                "log_start_offset": e.log_start_offset,
                "log_end_offset": e.log_end_offset,
            }
            for e in plan.entries
        ],
        "applied": not dry_run,
    }


async def list_summaries(broker: Broker, tenant: str | None, auth: str | None) -> list[dict]:
    """The groups this broker coordinates for ``tenant``, with state, members and lag."""
    out = []
    for qualified in broker.groups.local_groups(tenant):
        _, gid = unqualify(qualified)
        try:
            d = await describe(broker, tenant, gid, auth)
        except SluiceError:
            continue
        out.append(
            {
                "group_id": gid,
                "state": d["state"],
                "members": len(d["members"]),
                "total_lag": d["total_lag"],
                "health": d["health"],
                "coordinator": d["coordinator"],
            }
        )
    return out


# --- routes -----------------------------------------------------------------------------


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config
    coordinator = broker.groups

    async def body_json(request: web.Request) -> Any:
        body = await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )
        return parse_json(body) if body else {}

    def tenant_of(request: web.Request, operation: str, group_id: str) -> str | None:
        principal = broker.authorize(auth_header(request), operation, "group", group_id)
        return principal.tenant

    async def heartbeat(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "READ", gid)
        doc = await body_json(request)
        if not isinstance(doc, dict):
            raise InvalidRequestError("body: expected a JSON object")
        subs = doc.get("subscriptions")
        if subs is not None and (
            not isinstance(subs, list) or not all(isinstance(t, str) for t in subs)
        ):
            raise InvalidRequestError("body.subscriptions: expected a list of topic names")
        for topic in subs or ():
            broker.authorize(auth_header(request), "READ", "topic", topic)
        qualified = qualify(tenant, gid)
        response = await coordinator.heartbeat(
            qualified,
            _str(doc, "member_id"),
            _int(doc, "member_epoch"),
            subscriptions=subs,
            owned=_tps(doc.get("owned"), "body.owned"),
            instance_id=_str(doc, "instance_id"),
            rebalance_timeout_ms=_int(doc, "rebalance_timeout_ms", None, minimum=0),
            assignor=_str(doc, "assignor"),
            session_timeout_ms=session_timeout(_int(doc, "session_timeout_ms", None)),
            heartbeat_interval_ms=_int(doc, "heartbeat_interval_ms", None, minimum=10),
        )
        client_id = _str(doc, "client_id")
        if client_id and response.member_epoch >= 0:
            coordinator.client_ids[(qualified, response.member_id)] = client_id
        return json_response(heartbeat_json(response))

    async def commit(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "READ", gid)
        doc = await body_json(request)
        if not isinstance(doc, dict) or not isinstance(doc.get("offsets"), list):
            raise InvalidRequestError(
                'body: expected {"member_id", "member_epoch", "offsets": [{topic, partition, '
                "offset}]}"
            )
        root = broker.metadata.global_image()
        view = root if tenant is None else root.for_tenant(tenant)
        ts = now_ms()
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for i, item in enumerate(doc["offsets"]):
            (tp,) = _tps([item], f"body.offsets[{i}]") or []
            off = item.get("offset")
            if not isinstance(off, int) or isinstance(off, bool):
                raise InvalidRequestError(f"body.offsets[{i}].offset: expected an integer")
            meta = item.get("metadata") or ""
            if not isinstance(meta, str) or len(meta) > 4096:
                raise InvalidRequestError(f"body.offsets[{i}].metadata: a string up to 4096")
            offsets[tp] = OffsetAndMetadata(off, item.get("leader_epoch"), meta, ts)
        topics = {tp.topic for tp in offsets}
        for topic in topics:
            broker.authorize(auth_header(request), "READ", "topic", topic)
        # log ends for the beyond-the-end check, asked only where an offset passes the last
        # known end (ends only grow, so most commits cost no lookup)
        ends: dict[TopicPartition, int] = {}
        need = []
        for tp, om in offsets.items():
            view.partition(tp.topic, tp.partition)  # UNKNOWN_TOPIC_OR_PARTITION
            known = coordinator.known_ends.get((tenant, tp))
            if known is not None and om.offset <= known:
                ends[tp] = known
            else:
                need.append(tp)
        if need:
            found = await log_offsets(
                broker, view, [Query(tp.topic, tp.partition) for tp in need], auth_header(request)
            )
            for tp in need:
                lo = found.get((tp.topic, tp.partition))
                if lo is None:
                    raise SluiceError(f"the leader of {tp.topic}-{tp.partition} did not answer")
                ends[tp] = lo.high_watermark
                coordinator.known_ends[(tenant, tp)] = lo.high_watermark
        await coordinator.commit(
            qualify(tenant, gid),
            _str(doc, "member_id"),
            _int(doc, "member_epoch", -1),
            offsets,
            ends,
        )
        return json_response({"committed": len(offsets)})

    async def fetch_offsets(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DESCRIBE", gid)
        topic = request.query.get("topic")
        found = await coordinator.fetch_offsets(qualify(tenant, gid))
        return json_response(
            {
                "offsets": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "offset": om.offset,
                        "metadata": om.metadata,
                        "leader_epoch": om.leader_epoch,
                    }
                    for tp, om in sorted(found.items())
                    if topic is None or tp.topic == topic
                ]
            }
        )

    async def find_coordinator(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DESCRIBE", gid)
        c = coordinator.coordinator(qualify(tenant, gid))
        return json_response(
            {"coordinator_id": c.broker_id, "url": c.url, "partition": c.partition}
        )

    async def describe_group(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DESCRIBE", gid)
        return json_response(await describe(broker, tenant, gid, auth_header(request)))

    async def delete_group(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DELETE", gid)
        await coordinator.delete(qualify(tenant, gid))
        return web.Response(status=204)

    async def reset(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DELETE", gid)
        doc = await body_json(request)
        return json_response(await reset_offsets(broker, tenant, gid, doc, auth_header(request)))

    async def list_groups(request: web.Request) -> web.Response:
        principal = broker.authorize(auth_header(request), "DESCRIBE", "cluster")
        rows = await list_summaries(broker, principal.tenant, auth_header(request))
        # keep only groups the caller may describe
        visible = []
        for row in rows:
            try:
                broker.authorize(auth_header(request), "DESCRIBE", "group", row["group_id"])
            except SluiceError:
                continue
            visible.append(row)
        return json_response({"groups": visible, "broker_id": broker.image.broker_id})

    # --- internal (control plane, other brokers) ---------------------------------------

    async def internal_log_offsets(request: web.Request) -> web.Response:
        check_internal(broker, request)
        return json_response(answer_internal(broker, await body_json(request)))

    def internal_tenant(request: web.Request) -> str | None:
        check_internal(broker, request)
        tenant = request.match_info["tenant"]
        return None if tenant == "-" else tenant

    async def internal_list(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        rows = await list_summaries(broker, tenant, None)
        return json_response({"groups": rows, "broker_id": broker.image.broker_id})

    async def internal_describe(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        return json_response(await describe(broker, tenant, group_id_of(request), None))

    async def internal_delete(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        await coordinator.delete(qualify(tenant, group_id_of(request)))
        return web.Response(status=204)

    async def internal_reset(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        doc = await body_json(request)
        return json_response(await reset_offsets(broker, tenant, group_id_of(request), doc, None))

    async def describe_local(tenant: str | None, group_id: str) -> dict:
        return await describe(broker, tenant, group_id, None)

    lag_metrics.install(app, broker.metrics.registry, broker.groups, describe_local)
    base = "/sluice/v1/groups/{group}"
    r = app.router
    r.add_get("/sluice/v1/groups", list_groups, name="groups_list")
    r.add_post(base + "/heartbeat", heartbeat, name="group_heartbeat")
    r.add_post(base + "/offsets", commit, name="group_commit")
    r.add_get(base + "/offsets", fetch_offsets, name="group_offsets")
    r.add_get(base + "/coordinator", find_coordinator, name="group_coordinator")
    r.add_get(base, describe_group, name="group_describe")
    r.add_delete(base, delete_group, name="group_delete")
    r.add_post(base + "/reset-offsets", reset, name="group_reset")
    r.add_post("/internal/v1/log-offsets", internal_log_offsets, name="internal_log_offsets")
    ibase = "/internal/v1/tenants/{tenant}/groups"
    r.add_get(ibase, internal_list, name="internal_groups_list")
    r.add_get(ibase + "/{group}", internal_describe, name="internal_group_describe")
    r.add_delete(ibase + "/{group}", internal_delete, name="internal_group_delete")
    r.add_post(ibase + "/{group}/reset-offsets", internal_reset, name="internal_group_reset")
