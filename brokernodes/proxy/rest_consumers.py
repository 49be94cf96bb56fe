"""Confluent REST Proxy v2 consumer instances (``/consumers/{group}/...``).

Confluent's v2 shapes, JSON bodies; both ``application/vnd.kafka.v2+json`` and
``application/json`` are accepted (another body type is 415). ``records`` answers in the
instance's embedded format type (``application/vnd.kafka.binary.v2+json`` or
``...json.v2+json``; an ``Accept`` naming another format is Confluent's 406 / 40601), the
other routes in ``application/vnd.kafka.v2+json``; a second instance of one name in a group
is 409 / 40902. An instance lives in the broker that created it
(``base_uri`` points there) and is a group member through the SDK's ``AsyncGroupConsumer``,
acting with the API key that created it, which it keeps in memory only (never logged or
written). Only that key may use the instance. Records carry ``timestamp`` and ``headers``
besides Confluent's fields; ``format`` is ``binary`` (base64, the default), ``json`` or
``string``. As Confluent's proxy does, ``POST .../offsets`` takes the offset of the last
consumed record and commits the next one; with no body it commits everything the instance
returned. Between reads a background pass applies rebalances (revocations commit first with
auto-commit), so an idle instance does not hold up its group. Instances idle for
``consumer.instance.timeout.ms`` (default 5 minutes) are closed. ``isolation.level``
(``read_uncommitted``, the default, or ``read_committed``) is Kafka's: a read_committed
instance reads below the last stable offset and never returns an aborted transaction's
records (docs/transactions.md). Each tenant may hold its
own number of instances on a broker (its ``consumer_instances`` quota, else the broker's
per-tenant default), under the broker's total (``tenant_caps``): one tenant's instances
never lock another out.

The instances' clients reach the cluster through this broker's own URL, as any SDK client
would: the proxy uses the broker's request parsing, authorization and caps, never its
partitions.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson
from aiohttp import web

from brokernodes.client import AsyncConsumer, AsyncGroupConsumer
from brokernodes.client.consumer import ISOLATION_LEVELS
from brokernodes.errors import InvalidRequestError, SluiceError
from brokernodes.proxy.instance_routing import InstanceRouter, instance_name
from brokernodes.server.http.body import read_body
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol.confluent import JSON, check_content_type, records_media_type
from brokernodes.server.protocol.json_records import loads_writable, parse_json
from brokernodes.server.protocol.params import int_param
from brokernodes.server.tenant_caps import consumer_instances_cap

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

V2 = "application/vnd.kafka.v2+json"
FORMATS = ("binary", "json", "string")
DEFAULT_INSTANCE_TIMEOUT_MS = 300_000
MAINTAIN_INTERVAL_S = 0.5

logger = logging.getLogger("sluice.broker.consumers")


class UnknownConsumerInstanceError(SluiceError):
    error_code = "UNKNOWN_CONSUMER_INSTANCE"


class ConsumerInstanceExistsError(SluiceError):
    """A create naming an instance the group already has (Confluent's 409 / 40902)."""

    error_code = "CONSUMER_INSTANCE_EXISTS"


CONSUMED = (V2, JSON)


@dataclass
class Instance:
    group: str
    name: str
    key_id: str
    tenant: str | None
    fmt: str
    auto_commit: bool
    auto_offset_reset: str
    api_key: str = field(repr=False)
    isolation_level: str = "read_uncommitted"
    principal: str = ""
    timeout_ms: int = DEFAULT_INSTANCE_TIMEOUT_MS
    group_consumer: AsyncGroupConsumer | None = None
    assigned: AsyncConsumer | None = None
    last_used: float = field(default_factory=time.monotonic)
    consumed: dict = field(default_factory=dict)  # tp -> last returned offset (manual mode)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def close(self) -> None:
        if self.group_consumer is not None:
            with contextlib.suppress(SluiceError):
                await self.group_consumer.close()
            self.group_consumer = None
        if self.assigned is not None:
            with contextlib.suppress(SluiceError):
                await self.assigned.close()
            self.assigned = None


def _data(data: bytes | None, fmt: str) -> Any:
    if data is None:
        return None
    if fmt == "json":
        try:
            return loads_writable(data)
        except orjson.JSONDecodeError:
            return base64.b64encode(data).decode()
    if fmt == "string":
        return data.decode("utf-8", "replace")
    return base64.b64encode(data).decode()


def record_json(r, fmt: str) -> dict:
    return {
        "topic": r.topic,
        "key": _data(r.key, fmt),
        "value": _data(r.value, fmt),
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "headers": [
            {"name": n, "value": None if v is None else base64.b64encode(v).decode()}
            for n, v in r.headers
        ],
    }


def _partitions(doc: Any, field_name: str = "partitions") -> list[tuple[str, int]]:
    if not isinstance(doc, dict) or not isinstance(doc.get(field_name), list):
        raise InvalidRequestError(f'body: expected {{"{field_name}": [{{topic, partition}}]}}')
    out = []
    for i, p in enumerate(doc[field_name]):
        if (
            not isinstance(p, dict)
            or not isinstance(p.get("topic"), str)
            or not isinstance(p.get("partition"), int)
            or p["partition"] < 0
        ):
            raise InvalidRequestError(f"body.{field_name}[{i}]: expected {{topic, partition}}")
        out.append((p["topic"], p["partition"]))
    return out


def _offsets(doc: Any) -> dict[tuple[str, int], int]:
    tps = _partitions(doc, "offsets")
    out = {}
    for (t, p), item in zip(tps, doc["offsets"], strict=True):
        off = item.get("offset")
        if not isinstance(off, int) or isinstance(off, bool) or off < 0:
            raise InvalidRequestError(f"body.offsets: offset for {t}-{p} must be >= 0")
        out[(t, p)] = off
    return out


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config
    instances: dict[tuple[str | None, str, str], Instance] = {}
    tasks: list[asyncio.Task] = []
    cap = consumer_instances_cap()

    def admit(tenant: str | None, principal: str) -> None:
        """Room for one more instance of ``principal`` (of ``tenant``), or 429."""
        mine = [i for i in instances.values() if i.tenant == tenant]
        cap.check(
            broker.quotas.refresh(),
            tenant,
            principal,
            tenant_used=len(mine),
            principal_used=sum(1 for i in mine if i.principal == principal),
            total_used=len(instances),
        )

    async def body_json(request: web.Request, *, required: bool = True) -> Any:
        check_content_type(request.headers.get("Content-Type"), CONSUMED)
        body = await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )
        if not body:
            if required:
                raise InvalidRequestError("body: expected a JSON object")
            return None
        return parse_json(body)

    def v2(body: Any, status: int = 200, content_type: str = V2) -> web.Response:
        if status == 204:
            return web.Response(status=204)
        resp = json_response(body, status)
        resp.content_type = content_type
        return resp

    def instance_of(request: web.Request) -> Instance:
        group = request.match_info["group"]
        principal = broker.authorize(auth_header(request), "READ", "group", group)
        key = (principal.tenant, group, request.match_info["instance"])
        inst = instances.get(key)
        if inst is None or inst.key_id != principal.key_id:
            raise UnknownConsumerInstanceError(
                f"consumer instance {key[2]!r} of group {group!r} does not exist on this "
                "broker nor on any other (deleted, or expired after consumer.instance.timeout.ms)"
            )
        inst.last_used = time.monotonic()
        return inst

    async def create(request: web.Request) -> web.Response:
        group = request.match_info["group"]
        auth = auth_header(request)
        principal = broker.authorize(auth, "READ", "group", group)
        doc = await body_json(request, required=False) or {}
        if not isinstance(doc, dict):
            raise InvalidRequestError("body: expected a JSON object")
        name = doc.get("name") or instance_name(broker.image.broker_id)  # names this broker
        if not isinstance(name, str) or not 0 < len(name) <= 200 or "/" in name:
            raise InvalidRequestError("body.name: 1..200 characters, no '/'")
        fmt = doc.get("format", "binary")
        if fmt not in FORMATS:
            raise InvalidRequestError(f"body.format: one of {', '.join(FORMATS)}")
        reset = doc.get("auto.offset.reset", "latest")
        if reset not in ("earliest", "latest", "none"):
            raise InvalidRequestError("body.auto.offset.reset: earliest, latest or none")
        auto_commit = str(doc.get("auto.commit.enable", "true")).lower() == "true"
        isolation = doc.get("isolation.level", "read_uncommitted")
        if isolation not in ISOLATION_LEVELS:
            raise InvalidRequestError(
                f"body.isolation.level: read_uncommitted or read_committed, "
                f"not {str(isolation)[:40]!r}"
            )
        key = (principal.tenant, group, name)
        if key in instances:
            raise ConsumerInstanceExistsError(
                f"consumer instance {name!r} already exists in group {group!r}; use it, "
                "delete it first, or choose another name"
            )
        admit(principal.tenant, principal.name)
        token = (auth or "").partition(" ")[2].strip()
        instances[key] = Instance(
            group,
            name,
            principal.key_id,
            principal.tenant,
            fmt,
            auto_commit,
            reset,
            token,
            principal=principal.name,
            isolation_level=isolation,
        )
        base = (config.advertised_url or f"http://{config.host}:{config.port}").rstrip("/")
        return v2(
            {
                "instance_id": name,
                "base_uri": f"{base}/consumers/{quote(group, safe='')}/instances/{quote(name)}",
            }
        )

    async def delete(request: web.Request) -> web.Response:
        inst = instance_of(request)
        instances.pop((inst.tenant, inst.group, inst.name), None)
        await inst.close()
        return v2(None, 204)

    def self_url() -> str:
        """How the instances' clients reach the brokers: through this one."""
        return (config.advertised_url or f"http://127.0.0.1:{config.port}").rstrip("/")

    async def subscribe(request: web.Request) -> web.Response:
        inst = instance_of(request)
        doc = await body_json(request)
        topics = doc.get("topics") if isinstance(doc, dict) else None
        if (
            not isinstance(topics, list)
            or not topics
            or not all(isinstance(t, str) for t in topics)
        ):
            raise InvalidRequestError('body: expected {"topics": ["topic", ...]}')
        for t in topics:
            broker.authorize(auth_header(request), "READ", "topic", t)
            broker.image.topic(t)
        async with inst.lock:
            if inst.assigned is not None:
                raise InvalidRequestError("this instance has manual assignments; delete them first")
            if inst.group_consumer is None:
                c = AsyncGroupConsumer(
                    self_url(),
                    inst.api_key,
                    group_id=inst.group,
                    topics=topics,
                    auto_offset_reset=inst.auto_offset_reset,
                    isolation_level=inst.isolation_level,
                    enable_auto_commit=inst.auto_commit,
                    client_id=f"rest-proxy/{inst.name}",
                    heartbeat_interval_ms=1000,
                    fetch_max_wait_ms=200,
                )
                await c.start()
                inst.group_consumer = c
            else:
                inst.group_consumer.subscribe(topics)
        return v2(None, 204)

    async def get_subscription(request: web.Request) -> web.Response:
        inst = instance_of(request)
        topics = inst.group_consumer.subscription() if inst.group_consumer else []
        return v2({"topics": topics})

    async def unsubscribe(request: web.Request) -> web.Response:
        inst = instance_of(request)
        async with inst.lock:
            if inst.group_consumer is not None:
                await inst.group_consumer.close()
                inst.group_consumer = None
        return v2(None, 204)

    async def assign(request: web.Request) -> web.Response:
        inst = instance_of(request)
        tps = _partitions(await body_json(request))
        for t, _ in tps:
            broker.authorize(auth_header(request), "READ", "topic", t)
        async with inst.lock:
            if inst.group_consumer is not None:
                raise InvalidRequestError("this instance is subscribed; unsubscribe first")
            if inst.assigned is None:
                inst.assigned = AsyncConsumer(
                    self_url(),
                    inst.api_key,
                    auto_offset_reset=inst.auto_offset_reset,
                    isolation_level=inst.isolation_level,
                    fetch_max_wait_ms=200,
                )
                await inst.assigned.start()
            inst.assigned.assign(tps)
        return v2(None, 204)

    async def get_assignments(request: web.Request) -> web.Response:
        inst = instance_of(request)
        if inst.group_consumer is not None:
            tps = inst.group_consumer.assignment()
        elif inst.assigned is not None:
            tps = inst.assigned.assignment()
        else:
            tps = set()
        return v2({"partitions": [{"topic": t, "partition": p} for t, p in sorted(tps)]})

    async def records(request: web.Request) -> web.Response:
        inst = instance_of(request)
        timeout_ms = int_param(request.query, "timeout", 1000, minimum=0, maximum=30_000)
        max_bytes = int_param(request.query, "max_bytes", 1 << 20, minimum=1)
        fmt = request.query.get("format", inst.fmt)
        if fmt not in FORMATS:
            raise InvalidRequestError(
                f"query parameter 'format' must be one of {', '.join(FORMATS)}"
            )
        content_type = records_media_type(request.headers.get("Accept"), fmt)
        async with inst.lock:
            consumer = inst.group_consumer or inst.assigned
            if consumer is None:
                raise InvalidRequestError("subscribe or assign partitions before reading records")
            got = await consumer.poll(timeout_ms / 1000)
        out, size = [], 0
        for r in got:
            row = record_json(r, fmt)
            size += len(r.value or b"") + len(r.key or b"")
            out.append(row)
            inst.consumed[(r.topic, r.partition)] = r.offset
            if size >= max_bytes:
                break
        if len(out) < len(got) and inst.group_consumer is not None:
            rest = got[len(out)]  # re-read the rest next time
            inst.group_consumer.seek((rest.topic, rest.partition), rest.offset)
        return v2(out, content_type=content_type)

    async def commit(request: web.Request) -> web.Response:
        inst = instance_of(request)
        doc = await body_json(request, required=False)
        async with inst.lock:
            if inst.group_consumer is None:
                raise InvalidRequestError("commits need a subscription (a group member)")
            if doc:
                wanted = {tp: o + 1 for tp, o in _offsets(doc).items()}  # Confluent's rule
                await inst.group_consumer.commit(wanted)
            else:
                await inst.group_consumer.commit()
        return v2(None, 204)

    async def committed(request: web.Request) -> web.Response:
        inst = instance_of(request)
        doc = await body_json(request, required=False)
        wanted = _partitions(doc) if doc else None
        async with inst.lock:
            if inst.group_consumer is None:
                raise InvalidRequestError("committed offsets need a subscription (a group member)")
            found = await inst.group_consumer.committed(wanted)
        return v2(
            {
                "offsets": [
                    {"topic": t, "partition": p, "offset": o, "metadata": ""}
                    for (t, p), o in sorted(found.items())
                ]
            }
        )

    async def seek(request: web.Request) -> web.Response:
        inst = instance_of(request)
        offsets = _offsets(await body_json(request))
        async with inst.lock:
            target = inst.group_consumer or inst.assigned
            if target is None:
                raise InvalidRequestError("subscribe or assign partitions before seeking")
            for tp, o in offsets.items():
                target.seek(tp, o)
        return v2(None, 204)

    async def seek_edge(request: web.Request) -> web.Response:
        inst = instance_of(request)
        tps = _partitions(await body_json(request))
        spec = "earliest" if request.path.endswith("/beginning") else "latest"
        async with inst.lock:
            if inst.group_consumer is not None:
                await inst.group_consumer.seek_to(spec, tps)
            elif inst.assigned is not None:
                if spec == "earliest":
                    await inst.assigned.seek_to_beginning(*tps)
                else:
                    await inst.assigned.seek_to_end(*tps)
            else:
                raise InvalidRequestError("subscribe or assign partitions before seeking")
        return v2(None, 204)

    # --- housekeeping -----------------------------------------------------------------

    async def expire_loop() -> None:
        while True:
            await asyncio.sleep(5)
            now = time.monotonic()
            for key, inst in list(instances.items()):
                if now - inst.last_used > inst.timeout_ms / 1000:
                    instances.pop(key, None)
                    await inst.close()

    async def maintain_loop() -> None:
        """Rebalances go on between record reads: revocations and assignments are applied
        for subscribed instances nobody is reading from right now."""
        while True:
            await asyncio.sleep(MAINTAIN_INTERVAL_S)
            for inst in list(instances.values()):
                gc = inst.group_consumer
                if gc is None or inst.lock.locked():
                    continue
                try:
                    async with inst.lock:
                        await gc.maintain(0)
                except SluiceError as e:
                    logger.info("consumer instance %s: %s", inst.name, e)

    async def on_startup(_app) -> None:
        tasks.append(asyncio.create_task(expire_loop()))
        tasks.append(asyncio.create_task(maintain_loop()))

    async def on_cleanup(_app) -> None:
        for t in tasks:
            t.cancel()
        for inst in list(instances.values()):
            await inst.close()
        instances.clear()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)

    r = app.router
    # one front door: a call for an instance on another broker goes there (instance_routing)
    routed = InstanceRouter(broker, UnknownConsumerInstanceError).routed
    base = "/consumers/{group}/instances/{instance}"
    r.add_post("/consumers/{group}", create, name="v2_consumer_create")
    r.add_delete(base, routed(delete), name="v2_consumer_delete")
    r.add_post(base + "/subscription", routed(subscribe), name="v2_subscribe")
    r.add_get(base + "/subscription", routed(get_subscription), name="v2_subscription")
    r.add_delete(base + "/subscription", routed(unsubscribe), name="v2_unsubscribe")
    r.add_post(base + "/assignments", routed(assign), name="v2_assign")
    r.add_get(base + "/assignments", routed(get_assignments), name="v2_assignments")
    r.add_get(base + "/records", routed(records), name="v2_records")
    r.add_post(base + "/offsets", routed(commit), name="v2_commit")
    r.add_get(base + "/offsets", routed(committed), name="v2_committed")
    r.add_post(base + "/positions", routed(seek), name="v2_seek")
    r.add_post(base + "/positions/beginning", routed(seek_edge), name="v2_seek_beginning")
    r.add_post(base + "/positions/end", routed(seek_edge), name="v2_seek_end")
