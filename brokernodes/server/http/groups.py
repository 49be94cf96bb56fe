"""Consumer groups over HTTP: heartbeat (KIP-848), offset commit/fetch, find coordinator,
list, describe with lag, delete and offset resets; plus the internal routes the control
plane and other brokers use (``/internal/v1/...``, cluster secret).

Group names are tenant-scoped: the caller's API key decides the tenant (``authorize``), and
the coordinator keys the group as ``<tenant>/<group>``. ACLs: READ on the group to heartbeat
and commit (and READ on each committed topic), DESCRIBE to describe or fetch offsets, DELETE
to delete or reset (a reset rewrites the group's offsets; Kafka's tool needs READ; Sluice
asks DELETE since it discards progress).

The handlers parse, authorize and answer; describing, listing, commit checks and resets are
the group service's (``coordinator/service.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from brokernodes.errors import InvalidRequestError, SluiceError
from brokernodes.groups import OffsetAndMetadata, ResetSpec, TopicPartition
from brokernodes.server.coordinator import lag_metrics
from brokernodes.server.coordinator.group_coordinator import now_ms, session_timeout
from brokernodes.server.coordinator.service import GroupService
from brokernodes.server.http.body import read_body
from brokernodes.server.http.log_offsets import answer_internal, check_internal, log_offsets
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol.json_records import parse_json

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

MAX_GROUP_ID = 249
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


async def reset(
    service: GroupService, tenant: str | None, group_id: str, doc: Any, auth: str | None
) -> dict:
    """Parse a reset body and hand it to the service: a strategy over a topic's partitions,
    or (strategy ``offsets``) explicit offsets, the undo of an earlier reset."""
    if not isinstance(doc, dict):
        raise InvalidRequestError("body: expected a JSON object")
    dry_run = doc.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise InvalidRequestError("body.dry_run: expected true or false")
    if doc.get("strategy") == "offsets":
        targets, deletes = explicit_offsets(doc)
        return await service.set_offsets(tenant, group_id, targets, deletes, dry_run=dry_run)
    spec = reset_spec(doc)
    topic = doc.get("topic")
    if not isinstance(topic, str):
        raise InvalidRequestError("body.topic: the topic whose offsets to reset")
    parts = doc.get("partitions")
    if parts is not None and (
        not isinstance(parts, list)
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts)
    ):
        raise InvalidRequestError("body.partitions: a list of partition numbers, or null")
    return await service.reset_offsets(
        tenant, group_id, topic, parts, spec, dry_run=dry_run, auth=auth
    )


def explicit_offsets(doc: Mapping) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
    """``{"offsets": [{topic, partition, offset|null}]}`` -> (targets, deletes)."""
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
    return targets, deletes


def commit_offsets(doc: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    """An OffsetCommit body's offsets, stamped with the commit time."""
    if not isinstance(doc, dict) or not isinstance(doc.get("offsets"), list):
        raise InvalidRequestError(
            'body: expected {"member_id", "member_epoch", "offsets": [{topic, partition, offset}]}'
        )
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
    return offsets


# --- routes -----------------------------------------------------------------------------


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config
    service = GroupService(broker.groups, partial(log_offsets, broker))

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
        response = await service.heartbeat(
            tenant,
            gid,
            _str(doc, "member_id"),
            _int(doc, "member_epoch"),
            subscriptions=subs,
            owned=_tps(doc.get("owned"), "body.owned"),
            instance_id=_str(doc, "instance_id"),
            rebalance_timeout_ms=_int(doc, "rebalance_timeout_ms", None, minimum=0),
            assignor=_str(doc, "assignor"),
            session_timeout_ms=session_timeout(_int(doc, "session_timeout_ms", None)),
            heartbeat_interval_ms=_int(doc, "heartbeat_interval_ms", None, minimum=10),
            client_id=_str(doc, "client_id"),
            wait_ms=_int(doc, "wait_ms", 0, minimum=0),
        )
        return json_response(heartbeat_json(response))

    async def commit(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "READ", gid)
        doc = await body_json(request)
        offsets = commit_offsets(doc)
        for topic in {tp.topic for tp in offsets}:
            broker.authorize(auth_header(request), "READ", "topic", topic)
        await service.commit(
            tenant,
            gid,
            _str(doc, "member_id"),
            _int(doc, "member_epoch", -1),
            offsets,
            auth_header(request),
        )
        return json_response({"committed": len(offsets)})

    async def fetch_offsets(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DESCRIBE", gid)
        topic = request.query.get("topic")
        found = await service.fetch_offsets(tenant, gid)
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
        c = service.find_coordinator(tenant, gid)
        return json_response(
            {"coordinator_id": c.broker_id, "url": c.url, "partition": c.partition}
        )

    async def describe_group(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DESCRIBE", gid)
        return json_response(await service.describe(tenant, gid, auth_header(request)))

    async def delete_group(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DELETE", gid)
        await service.delete(tenant, gid)
        return web.Response(status=204)

    async def reset_group(request: web.Request) -> web.Response:
        gid = group_id_of(request)
        tenant = tenant_of(request, "DELETE", gid)
        doc = await body_json(request)
        return json_response(await reset(service, tenant, gid, doc, auth_header(request)))

    async def list_groups(request: web.Request) -> web.Response:
        principal = broker.authorize(auth_header(request), "DESCRIBE", "cluster")
        rows = await service.list_summaries(principal.tenant, auth_header(request))
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
        rows = await service.list_summaries(tenant, None)
        return json_response({"groups": rows, "broker_id": broker.image.broker_id})

    async def internal_describe(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        return json_response(await service.describe(tenant, group_id_of(request), None))

    async def internal_delete(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        await service.delete(tenant, group_id_of(request))
        return web.Response(status=204)

    async def internal_reset(request: web.Request) -> web.Response:
        tenant = internal_tenant(request)
        doc = await body_json(request)
        return json_response(await reset(service, tenant, group_id_of(request), doc, None))

    async def describe_local(tenant: str | None, group_id: str) -> dict:
        return await service.describe(tenant, group_id, None)

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
    r.add_post(base + "/reset-offsets", reset_group, name="group_reset")
    r.add_post("/internal/v1/log-offsets", internal_log_offsets, name="internal_log_offsets")
    ibase = "/internal/v1/tenants/{tenant}/groups"
    r.add_get(ibase, internal_list, name="internal_groups_list")
    r.add_get(ibase + "/{group}", internal_describe, name="internal_group_describe")
    r.add_delete(ibase + "/{group}", internal_delete, name="internal_group_delete")
    r.add_post(ibase + "/{group}/reset-offsets", internal_reset, name="internal_group_reset")
