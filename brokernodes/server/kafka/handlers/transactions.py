"""Kafka API handlers for transactions (KIP-98): InitProducerId with a transactional id,
FindCoordinator's TRANSACTION key type, AddPartitionsToTxn (the client versions 0-3),
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and for operators DescribeTransactions and
ListTransactions.

The work is the transaction coordinator's (``server/transactions/coordinator.py``) and, for
TxnOffsetCommit, the group coordinator's. As for groups, the caller's key decides the tenant
and a transactional id is qualified within it (``<tenant>/<id>``), so two tenants' producers
of the same transactional.id are unrelated. Authorization is Kafka's: WRITE on the
TRANSACTIONAL_ID resource to use an id (DESCRIBE to find its coordinator or describe it;
TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), WRITE on every topic a transaction adds
(TOPIC_AUTHORIZATION_FAILED per partition otherwise), READ on the group for its offsets, as
OffsetCommit. Refusals are Kafka's codes.
"""

from __future__ import annotations

from brokernodes.errors import SluiceError, UnauthenticatedError
from brokernodes.groups import OffsetAndMetadata, TopicPartition
from brokernodes.server.coordinator.group_coordinator import now_ms
from brokernodes.server.coordinator.offsets_topic import qualify, unqualify
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS
from brokernodes.server.kafka.handlers.offset_commits import offsets_to_commit
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.frames import RequestHeader
from brokernodes.transactions.state import TxnError, TxnState

MAX_TRANSACTIONAL_ID = 249  # as group ids: every id made over Kafka can be named elsewhere


class InvalidTransactionalIdError(SluiceError):
    error_code = "INVALID_REQUEST"


def code(e: Exception) -> int:
    """Kafka's number for a refusal; an unauthenticated caller is not answered."""
    if isinstance(e, UnauthenticatedError):
        raise e
    if isinstance(e, TxnError):
        return kerr.code_for(e.code)
    return kerr.kafka_code(e)


def qualified_id(
    ctx: KafkaContext, transactional_id: str | None, operation: str = "WRITE", *, count=True
) -> tuple[str | None, str]:
    """(tenant, qualified transactional id) once the caller may ``operation`` (WRITE to use
    it, DESCRIBE to look at it) the TRANSACTIONAL_ID resource, as Kafka authorizes."""
    if not transactional_id or len(transactional_id) > MAX_TRANSACTIONAL_ID:
        raise InvalidTransactionalIdError(
            f"transactional ids are 1..{MAX_TRANSACTIONAL_ID} characters"
        )
    principal = ctx.authorize(operation, "transactional_id", transactional_id, count=count)
    return principal.tenant, qualify(principal.tenant, transactional_id)


# --- InitProducerId (22) with a transactional id ---------------------------------------------


async def init_transactional(ctx: KafkaContext, request: dict) -> dict:
    answer = {"throttle_time_ms": 0, "producer_id": -1, "producer_epoch": -1}
    try:
        _, qualified = qualified_id(ctx, request["transactional_id"])
        ctx.authorize("IDEMPOTENT_WRITE", "cluster")
        pid, epoch = await ctx.broker.transactions.init_producer_id(
            qualified,
            request["transaction_timeout_ms"],
            request["producer_id"],
            request["producer_epoch"],
        )
    except (SluiceError, TxnError) as e:
        return {**answer, "error_code": code(e)}
    return {**answer, "error_code": kerr.NONE, "producer_id": pid, "producer_epoch": epoch}


# --- FindCoordinator (10), key type TRANSACTION ------------------------------------------------


def find_txn_coordinator(ctx: KafkaContext, key: str) -> dict:
    """FindCoordinator's answer for a transactional id (the shape ``classic_groups._find``
    gives)."""
    out = {"key": key, "node_id": -1, "host": "", "port": -1}
    try:
        _, qualified = qualified_id(ctx, key, "DESCRIBE")
        c = ctx.broker.transactions.coordinator(qualified)
        info = ctx.broker.metadata.global_image().brokers.get(c.broker_id)
        if c.broker_id < 0 or info is None or not info.kafka:
            return {
                **out,
                "error_code": kerr.COORDINATOR_NOT_AVAILABLE,
                "error_message": "the transaction coordinator has no Kafka listener right now",
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
        return {**out, "error_code": code(e), "error_message": e.message}


# --- AddPartitionsToTxn (24) --------------------------------------------------------------------


def _writable(ctx: KafkaContext, tenant: str | None, name: str, partitions: list[int]) -> int:
    """NONE, or the code every partition of the topic answers."""
    if name in INTERNAL_TOPICS:
        return kerr.INVALID_TOPIC_EXCEPTION
    try:
        ctx.authorize("WRITE", "topic", name)
    except UnauthenticatedError:
        raise
    except SluiceError as e:
        return kerr.kafka_code(e)
    root = ctx.broker.metadata.global_image()
    view = root if tenant is None else root.for_tenant(tenant)
    topic = view.topics.get(name)
    if topic is None or any(not 0 <= p < len(topic.partitions) for p in partitions):
        return kerr.UNKNOWN_TOPIC_OR_PARTITION
    return kerr.NONE


async def add_partitions_to_txn(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """All or nothing, as Kafka answers: a partition that cannot join fails the request,
    and the others answer OPERATION_NOT_ATTEMPTED."""
    wanted = [(t["name"] or "", list(t["partitions"])) for t in request["v3_and_below_topics"]]
    errors: dict[tuple[str, int], int] = {}
    try:
        tenant, qualified = qualified_id(ctx, request["v3_and_below_transactional_id"])
        for name, parts in wanted:
            error = _writable(ctx, tenant, name, parts)
            for p in parts:
                errors[(name, p)] = error
        if any(errors.values()):
            errors = {tp: (e if e else kerr.OPERATION_NOT_ATTEMPTED) for tp, e in errors.items()}
        else:
            await ctx.broker.transactions.add_partitions(
                qualified,
                request["v3_and_below_producer_id"],
                request["v3_and_below_producer_epoch"],
                list(errors),
            )
    except (SluiceError, TxnError) as e:
        failed = code(e)
        errors = {(n, p): failed for n, parts in wanted for p in parts}
    return {
        "throttle_time_ms": 0,
        "results_by_topic_v3_and_below": [
            {
                "name": name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": errors.get((name, p), 0)}
                    for p in parts
                ],
            }
            for name, parts in wanted
        ],
    }


# --- AddOffsetsToTxn (25) -----------------------------------------------------------------------


async def add_offsets_to_txn(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    try:
        tenant, qualified = qualified_id(ctx, request["transactional_id"])
        group_id = request["group_id"]
        if not group_id:
            raise InvalidTransactionalIdError("the group id must not be empty")
        ctx.authorize("READ", "group", group_id)
        await ctx.broker.transactions.add_offsets(
            qualified,
            request["producer_id"],
            request["producer_epoch"],
            qualify(tenant, group_id),
        )
    except (SluiceError, TxnError) as e:
        return {"throttle_time_ms": 0, "error_code": code(e)}
    return {"throttle_time_ms": 0, "error_code": kerr.NONE}


# --- TxnOffsetCommit (28) -----------------------------------------------------------------------


async def txn_offset_commit(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """Sent to the group's coordinator: the offsets join the producer's transaction and
    become the group's committed offsets when it commits."""
    order = [
        (t["name"] or "", p["partition_index"]) for t in request["topics"] for p in t["partitions"]
    ]
    answers: dict[tuple[str, int], int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    try:
        tenant, _ = qualified_id(ctx, request["transactional_id"])
        group_id = request["group_id"] or ""
        ctx.authorize("READ", "group", group_id)
        offsets = offsets_to_commit(ctx, tenant, request["topics"], answers)
        if offsets:
            await ctx.broker.groups.txn_commit(
                qualify(tenant, group_id),
                request["producer_id"],
                request["producer_epoch"],
                offsets,
                member_id=request["member_id"] or None,
                generation_id=request["generation_id"],
                instance_id=request["group_instance_id"],
            )
    except (SluiceError, TxnError) as e:
        failed = code(e)
        answers.update({tp: failed for tp in order if tp not in answers})
    topics: dict[str, list] = {}
    for name, p in order:
        topics.setdefault(name, []).append(
            {"partition_index": p, "error_code": answers.get((name, p), kerr.NONE)}
        )
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
    }


# --- EndTxn (26) --------------------------------------------------------------------------------


async def end_txn(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    try:
        _, qualified = qualified_id(ctx, request["transactional_id"])
        await ctx.broker.transactions.end_txn(
            qualified, request["producer_id"], request["producer_epoch"], request["committed"]
        )
    except (SluiceError, TxnError) as e:
        error = code(e)
        if error == kerr.PRODUCER_FENCED and header.api_version < 2:
            error = kerr.INVALID_PRODUCER_EPOCH  # before v2 clients know no PRODUCER_FENCED
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, "error_code": kerr.NONE}


# --- DescribeTransactions (65), ListTransactions (66) -------------------------------------------


async def describe_transactions(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    states = []
    for tid in request["transactional_ids"]:
        entry = {
            "error_code": kerr.NONE,
            "transactional_id": tid,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        states.append(entry)
        try:
            _, qualified = qualified_id(ctx, tid, "DESCRIBE")
            meta = await ctx.broker.transactions.describe(qualified)
        except (SluiceError, TxnError) as e:
            entry["error_code"] = code(e)
            continue
        if meta is None:
            entry["error_code"] = kerr.TRANSACTIONAL_ID_NOT_FOUND
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(p)
        entry.update(
            transaction_state=meta.state.value,
            transaction_timeout_ms=meta.timeout_ms,
            transaction_start_time_ms=meta.start_ms,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        )
    return {"throttle_time_ms": 0, "transaction_states": states}


async def list_transactions(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """The caller's tenant's transactions this broker coordinates (clients ask every broker),
    filtered by state, producer id and (v1) minimum duration."""
    try:
        tenant = ctx.authorize("DESCRIBE", "cluster").tenant
    except SluiceError as e:
        return {
            "throttle_time_ms": 0,
            "error_code": code(e),
            "unknown_state_filters": [],
            "transaction_states": [],
        }
    names = {s.value for s in TxnState}
    wanted_states = set(request["state_filters"] or ())
    unknown = sorted(wanted_states - names)
    pids = set(request["producer_id_filters"] or ())
    min_duration = request.get("duration_filter", -1)
    now = now_ms()
    out = []
    for meta in ctx.broker.transactions.local(tenant):
        if wanted_states and meta.state.value not in wanted_states:
            continue
        try:  # only the ids the caller may describe, as Kafka lists them
            qualified_id(ctx, unqualify(meta.transactional_id)[1], "DESCRIBE", count=False)
        except SluiceError:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if min_duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration):
            continue
        out.append(
            {
                "transactional_id": unqualify(meta.transactional_id)[1],
                "producer_id": meta.producer_id,
                "transaction_state": meta.state.value,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": kerr.NONE,
        "unknown_state_filters": unknown,
        "transaction_states": out,
    }


HANDLERS: dict[int, Handler] = {
    apis.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    apis.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    apis.END_TXN: end_txn,
    apis.TXN_OFFSET_COMMIT: txn_offset_commit,
    apis.DESCRIBE_TRANSACTIONS: describe_transactions,
    apis.LIST_TRANSACTIONS: list_transactions,
}
