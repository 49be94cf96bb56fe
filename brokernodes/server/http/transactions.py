"""Transactions over Sluice's own API: the transaction coordinator's operations as HTTP
routes, for the SDK's transactional producer (docs/transactions.md, "Sluice's API").

``POST /sluice/v1/transactions/{transactional_id}/...``:

- ``init`` ``{"transaction_timeout_ms"?, "producer_id"?, "producer_epoch"?}`` -> the
  producer id and (bumped) epoch: Kafka's InitProducerId, which fences older instances;
- ``partitions`` ``{"producer_id", "producer_epoch", "partitions": [{topic, partition}]}``:
  AddPartitionsToTxn, all or nothing;
- ``groups`` ``{"producer_id", "producer_epoch", "group_id"}``: AddOffsetsToTxn;
- ``offsets`` ``{"producer_id", "producer_epoch", "group_id", "offsets": [{topic,
  partition, offset, metadata?, leader_epoch?}], "member_id"?, "generation_id"?,
  "group_instance_id"?}``: TxnOffsetCommit, answered by the group's coordinator;
- ``end`` ``{"producer_id", "producer_epoch", "commit": true|false}``: EndTxn.

Each call is the coordinator's (``server/transactions/coordinator.py``, the service the Kafka
handlers call): any broker takes it and forwards it once to the coordinator of the id (of the
group, for ``offsets``), as FindCoordinator would send a Kafka client there. Authorization
is the Kafka handlers': WRITE on the TRANSACTIONAL_ID, WRITE on each topic added, READ on the
group and its topics for offsets. Refusals carry Kafka's names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from brokernodes.errors import (
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from brokernodes.groups import OffsetAndMetadata, TopicPartition
from brokernodes.server.coordinator.group_coordinator import (
    CoordinatorNotAvailableError,
    now_ms,
)
from brokernodes.server.coordinator.offsets_topic import OFFSETS_TOPIC, qualify
from brokernodes.server.http.body import read_body
from brokernodes.server.http.forward import forwardable, forwarder
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol.json_records import parse_json
from brokernodes.server.transactions.produce_check import TxnRefusedError, refused
from brokernodes.server.transactions.topic import TXN_TOPIC
from brokernodes.transactions.state import TxnError

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.coordinator.group_coordinator import Coordinator

MAX_TRANSACTIONAL_ID = 249  # as the Kafka handlers: every id is usable on both APIs
MAX_GROUP_ID = 249
MAX_OFFSET_METADATA = 4096
DEFAULT_TIMEOUT_MS = 60_000  # Kafka's transaction.timeout.ms default
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC, "__usage"})


# --- parsing (pure) ----------------------------------------------------------------------


def transactional_id_of(request: Any) -> str:
    tid = request.match_info["transactional_id"]
    if not tid or len(tid) > MAX_TRANSACTIONAL_ID or any(ord(c) < 32 for c in tid):
        raise InvalidRequestError(
            f"transactional ids are 1..{MAX_TRANSACTIONAL_ID} printable characters, "
            f"got {tid[:40]!r}"
        )
    return tid


def integer(doc: Mapping, name: str, default: Any = ..., *, minimum: int | None = None) -> int:
    v = doc.get(name)
    if v is None:
        if default is ...:
            raise InvalidRequestError(f"body.{name}: required (an integer)")
        return default
    if not isinstance(v, int) or isinstance(v, bool):
        raise InvalidRequestError(f"body.{name}: expected an integer")
    if minimum is not None and v < minimum:
        raise InvalidRequestError(f"body.{name}: must be >= {minimum}, got {v}")
    return v


def text(doc: Mapping, name: str, *, required: bool = False, limit: int = 249) -> str | None:
    v = doc.get(name)
    if v is None or v == "":
        if required:
            raise InvalidRequestError(f"body.{name}: required (a non-empty string)")
        return None
    if not isinstance(v, str) or len(v) > limit:
        raise InvalidRequestError(f"body.{name}: expected a string of at most {limit} characters")
    return v


def producer_of(doc: Mapping) -> tuple[int, int]:
    return integer(doc, "producer_id", minimum=0), integer(doc, "producer_epoch", minimum=0)


def partitions_of(doc: Mapping) -> list[tuple[str, int]]:
    items = doc.get("partitions")
    if not isinstance(items, list) or not items:
        raise InvalidRequestError('body.partitions: a non-empty list of {"topic", "partition"}')
    out: list[tuple[str, int]] = []
    for i, item in enumerate(items):
        topic = item.get("topic") if isinstance(item, dict) else None
        number = item.get("partition") if isinstance(item, dict) else None
        if (
            not isinstance(topic, str)
            or not topic
            or not isinstance(number, int)
            or isinstance(number, bool)
            or number < 0
        ):
            raise InvalidRequestError(f"body.partitions[{i}]: expected {{topic, partition >= 0}}")
        if (topic, number) not in out:
            out.append((topic, number))
    return out


def offsets_of(doc: Mapping) -> dict[TopicPartition, OffsetAndMetadata]:
    items = doc.get("offsets")
    if not isinstance(items, list) or not items:
        raise InvalidRequestError(
            'body.offsets: a non-empty list of {"topic", "partition", "offset"}'
        )
    ts = now_ms()
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidRequestError(f"body.offsets[{i}]: expected an object")
        (tp,) = partitions_of({"partitions": [item]})
        offset = integer(item, "offset", minimum=0)
        metadata = item.get("metadata") or ""
        if not isinstance(metadata, str) or len(metadata.encode()) > MAX_OFFSET_METADATA:
            raise InvalidRequestError(
                f"body.offsets[{i}].metadata: a string of at most {MAX_OFFSET_METADATA} bytes"
            )
        epoch = integer(item, "leader_epoch", None)
        out[TopicPartition(*tp)] = OffsetAndMetadata(
            offset, epoch if epoch is not None and epoch >= 0 else None, metadata, ts
        )
    return out


# --- routes ------------------------------------------------------------------------------


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config

    async def body_json(request: Any) -> tuple[bytes, dict]:
        body = await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )
        doc = parse_json(body) if body else {}
        if not isinstance(doc, dict):
            raise InvalidRequestError("body: expected a JSON object")
        return bytes(body), doc

    def qualified_id(request: Any) -> tuple[str | None, str]:
        """(tenant, qualified id) once the caller may WRITE the transactional id."""
        tid = transactional_id_of(request)
        principal = broker.authorize(auth_header(request), "WRITE", "transactional_id", tid)
        return principal.tenant, qualify(principal.tenant, tid)

    async def elsewhere(request: Any, find: Any, body: bytes, what: str) -> web.Response | None:
        """The coordinator's answer when another broker is it (forwarded once); None when
        this broker answers (it is the coordinator, or the call was forwarded here already:
        the service then answers NOT_COORDINATOR, which the caller retries)."""
        c: Coordinator = find()
        me = broker.image.broker_id
        if c.broker_id == me or not forwardable(request):
            return None
        if c.broker_id < 0:
            raise CoordinatorNotAvailableError(f"{what} has no coordinator right now; retry")
        fwd = forwarder(broker)

        def target() -> tuple[int, str]:
            return fwd.broker_target(find().broker_id)

        return await fwd.forward_to(request, target, what, body, idempotent=False)

    async def call(coro) -> None:
        try:
            await coro
        except TxnError as e:
            raise refused(e) from None

    async def init(request: web.Request) -> web.Response:
        _, qualified = qualified_id(request)
        broker.authorize(auth_header(request), "IDEMPOTENT_WRITE", "cluster")
        body, doc = await body_json(request)
        timeout_ms = integer(doc, "transaction_timeout_ms", DEFAULT_TIMEOUT_MS, minimum=1)
        pid = integer(doc, "producer_id", -1, minimum=-1)
        epoch = integer(doc, "producer_epoch", -1, minimum=-1)
        find = lambda: broker.transactions.coordinator(qualified)  # noqa: E731
        forwarded = await elsewhere(request, find, body, "the transaction coordinator")
        if forwarded is not None:
            return forwarded
        try:
            pid, epoch = await broker.transactions.init_producer_id(
                qualified, timeout_ms, pid, epoch
            )
        except TxnError as e:
            raise refused(e) from None
        return json_response({"producer_id": pid, "producer_epoch": epoch})

    def writable(request: Any, wanted: list[tuple[str, int]]) -> None:
        """Raise unless the caller may WRITE every topic and each partition exists."""
        for name in dict.fromkeys(t for t, _ in wanted):
            if name in INTERNAL_TOPICS:
                raise TxnRefusedError(
                    "INVALID_TOPIC_EXCEPTION", f"{name} is an internal topic: never written"
                )
            broker.authorize(auth_header(request), "WRITE", "topic", name)
        for name, number in wanted:
            topic = broker.image.topics.get(name)
            if topic is None or number >= len(topic.partitions):
                raise UnknownTopicOrPartitionError(
                    f"{name}-{number} does not exist; nothing was added to the transaction"
                )

    async def add_partitions(request: web.Request) -> web.Response:
        _, qualified = qualified_id(request)
        body, doc = await body_json(request)
        pid, epoch = producer_of(doc)
        wanted = partitions_of(doc)
        writable(request, wanted)
        find = lambda: broker.transactions.coordinator(qualified)  # noqa: E731
        forwarded = await elsewhere(request, find, body, "the transaction coordinator")
        if forwarded is not None:
            return forwarded
        await call(broker.transactions.add_partitions(qualified, pid, epoch, wanted))
        return json_response({"added": [{"topic": t, "partition": p} for t, p in wanted]})

    async def add_group(request: web.Request) -> web.Response:
        tenant, qualified = qualified_id(request)
        body, doc = await body_json(request)
        pid, epoch = producer_of(doc)
        group_id = text(doc, "group_id", required=True, limit=MAX_GROUP_ID)
        broker.authorize(auth_header(request), "READ", "group", group_id)
        find = lambda: broker.transactions.coordinator(qualified)  # noqa: E731
        forwarded = await elsewhere(request, find, body, "the transaction coordinator")
        if forwarded is not None:
            return forwarded
        await call(
            broker.transactions.add_offsets(qualified, pid, epoch, qualify(tenant, group_id))
        )
        return json_response({"group_id": group_id})

    async def txn_offsets(request: web.Request) -> web.Response:
        tenant, _ = qualified_id(request)
        body, doc = await body_json(request)
        pid, epoch = producer_of(doc)
        group_id = text(doc, "group_id", required=True, limit=MAX_GROUP_ID)
        broker.authorize(auth_header(request), "READ", "group", group_id)
        offsets = offsets_of(doc)
        for name in {tp.topic for tp in offsets}:
            broker.authorize(auth_header(request), "READ", "topic", name)
        for tp in offsets:
            topic = broker.image.topics.get(tp.topic)
            if topic is None or tp.partition >= len(topic.partitions):
                raise UnknownTopicOrPartitionError(f"{tp.topic}-{tp.partition} does not exist")
        qualified_group = qualify(tenant, group_id)
        find = lambda: broker.groups.coordinator(qualified_group)  # noqa: E731
        forwarded = await elsewhere(request, find, body, "the group coordinator")
        if forwarded is not None:
            return forwarded
        await call(
            broker.groups.txn_commit(
                qualified_group,
                pid,
                epoch,
                offsets,
                member_id=text(doc, "member_id", limit=4096),
                generation_id=integer(doc, "generation_id", -1),
                instance_id=text(doc, "group_instance_id"),
            )
        )
        return json_response({"committed": len(offsets)})

    async def end(request: web.Request) -> web.Response:
        _, qualified = qualified_id(request)
        body, doc = await body_json(request)
        pid, epoch = producer_of(doc)
        commit = doc.get("commit")
        if not isinstance(commit, bool):
            raise InvalidRequestError("body.commit: true to commit, false to abort")
        find = lambda: broker.transactions.coordinator(qualified)  # noqa: E731
        forwarded = await elsewhere(request, find, body, "the transaction coordinator")
        if forwarded is not None:
            return forwarded
        await call(broker.transactions.end_txn(qualified, pid, epoch, commit))
        return json_response({"committed": commit})

    base = "/sluice/v1/transactions/{transactional_id}"
    r = app.router
    r.add_post(base + "/init", init, name="txn_init")
    r.add_post(base + "/partitions", add_partitions, name="txn_add_partitions")
    r.add_post(base + "/groups", add_group, name="txn_add_group")
    r.add_post(base + "/offsets", txn_offsets, name="txn_offset_commit")
    r.add_post(base + "/end", end, name="txn_end")
