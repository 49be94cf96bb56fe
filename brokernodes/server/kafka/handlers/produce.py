"""Produce (v3-11) and InitProducerId (v0-5).

Each partition's record batches are appended exactly as the binary HTTP produce appends them
(``Broker.append_batches``: storage quota, leader append with idempotent deduplication,
acks 0/1/all), the partitions of a request in parallel. Errors are per partition, as Kafka
answers them. The produce byte-rate quota is computed, not slept: ``throttle_time_ms`` mutes
the connection after the answer (KIP-219). acks=0 gets no answer (the connection still
mutes for the throttle); if a partition failed then, the connection is closed (as Kafka
does) so the producer refreshes its metadata.

Transactional batches need the request's ``transactional_id`` (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers) and a partition the producer has
added to its ongoing transaction: the leader asks the transaction coordinator
(``TransactionCoordinator.verify``, KIP-890's verification) and refuses a partition that is
not in it with INVALID_TXN_STATE (an older epoch: INVALID_PRODUCER_EPOCH; a coordinator
that cannot answer: NOT_ENOUGH_REPLICAS, which producers retry, as Kafka does). Control batches
are written by the coordinator only; a client's is refused (INVALID_RECORD). An
InitProducerId naming a transactional id goes to the transaction coordinator
(``handlers/transactions.py``).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Coroutine
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.records.header import ATTRIBUTES_AT, CONTROL_BIT, LENGTH_AT, TRANSACTIONAL_BIT
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.handlers import transactions
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS, leader_hint
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.transactions.produce_check import transactional_header

if TYPE_CHECKING:
    from brokernodes.server.auth import Principal
    from brokernodes.server.protocol.kafka.frames import RequestHeader

logger = logging.getLogger("sluice.kafka")

ACKS = frozenset({0, 1, -1})  # -1: all in-sync replicas
MOVED = frozenset({kerr.NOT_LEADER_OR_FOLLOWER, kerr.FENCED_LEADER_EPOCH})
NO_TRANSACTIONAL_ID = (
    "transactional batches need the request's transactional_id (a producer with "
    "transactional.id set)"
)
COORDINATOR_UNREACHABLE = frozenset(
    {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"}
)
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")


def has_transactional_batch(buf) -> bool:
    """Whether any batch of ``buf`` is transactional or a control batch (a header walk;
    a malformed buffer answers False and is refused by the append's own validation)."""
    pos, end = 0, len(buf)
    while pos + ATTRIBUTES_AT + 2 <= end:
        (attributes,) = _ATTRIBUTES.unpack_from(buf, pos + ATTRIBUTES_AT)
        if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT):
            return True
        (length,) = _LENGTH.unpack_from(buf, pos + LENGTH_AT)
        if length <= 0:
            return False
        pos += LENGTH_AT + 4 + length
    return False


async def _txn_error(
    ctx: KafkaContext, qualified: str | None, topic: str, index: int, records
) -> dict | None:
    """The answer refusing a transactional or control batch, or None when it may go on."""
    txn, control, pid, epoch = transactional_header(records)
    if control:
        return partition_error(
            index, kerr.INVALID_RECORD, "control batches are written by the coordinator only"
        )
    if not txn:
        return None
    if qualified is None:
        return partition_error(
            index, kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONAL_ID
        )
    leader_epoch = ctx.broker.replicas.get_partition(topic, index).leader_epoch
    try:
        answers = await ctx.broker.transactions.verify(
            qualified, pid, epoch, [(topic, index)], leader_epoch
        )
        error = answers.get((topic, index))
    except SluiceError as e:
        error = e.error_code
    if error is None:
        return None
    if error in COORDINATOR_UNREACHABLE:
        # producers retry NOT_ENOUGH_REPLICAS; a coordinator error on Produce they may not
        return partition_error(
            index,
            kerr.NOT_ENOUGH_REPLICAS,
            f"the transaction coordinator could not verify {topic}-{index} ({error}); retry",
        )
    return partition_error(
        index,
        kerr.code_for(error),
        f"{topic}-{index} is not in producer {pid}'s ongoing transaction at epoch {epoch}"
        f" ({error}); add it first (AddPartitionsToTxn)",
    )


def partition_error(index: int, code: int, message: str | None = None) -> dict:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "error_message": message,
    }


async def _append(
    ctx: KafkaContext,
    principal: Principal,
    topic: str,
    index: int,
    records,
    acks: int,
    timeout_s: float,
    qualified_txn: str | None = None,
) -> dict:
    broker = ctx.broker
    try:
        if records is not None and has_transactional_batch(records):
            refused = await _txn_error(ctx, qualified_txn, topic, index, records)
            if refused is not None:
                return refused
        partition = broker.replicas.get_partition(topic, index)
        buf = bytearray(records) if records is not None else bytearray()
        result = await broker.append_batches(
            principal, partition, topic, buf, acks=acks, timeout=timeout_s
        )
    except SluiceError as e:
        return partition_error(index, kerr.kafka_code(e), e.message)
    except Exception as e:  # never a crash: the client gets an error it retries
        logger.exception("Kafka produce to %s-%d failed", topic, index)
        return partition_error(index, kerr.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)
    return {
        "index": index,
        "error_code": kerr.NONE,
        "base_offset": result.base_offset,
        "log_append_time_ms": result.log_append_time,
        "log_start_offset": result.log_start_offset,
    }


async def produce(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict | None:
    acks = request["acks"]
    timeout_s = max(request["timeout_ms"], 0) / 1000
    transactional = request.get("transactional_id") is not None
    qualified_txn: str | None = None
    txn_code, txn_message = kerr.NONE, None
    if transactional:
        try:
            qualified = transactions.qualified_id(ctx, request["transactional_id"], count=False)
            qualified_txn = qualified[1]
        except SluiceError as e:
            txn_code, txn_message = transactions.code(e), e.message
    principal: Principal | None = None
    nbytes = 0
    topics: list[dict] = []
    jobs: list[tuple[list, int, Coroutine]] = []  # (answers, slot, the partition's append)
    for t in request["topic_data"]:
        name, parts = t["name"], t["partition_data"]
        answers: list = []
        topics.append({"name": name, "partition_responses": answers})
        nbytes += sum(len(p["records"]) for p in parts if p["records"] is not None)
        code, message = kerr.NONE, None
        if acks not in ACKS:
            code, message = kerr.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1 (all), not {acks}"
        elif txn_code != kerr.NONE:
            code, message = txn_code, txn_message
        elif name in INTERNAL_TOPICS:  # the broker's own state: never written by clients
            code, message = kerr.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic"
        else:
            try:
                principal = ctx.authorize("WRITE", "topic", name)
            except SluiceError as e:
                code, message = kerr.kafka_code(e), e.message
        for p in parts:
            if code != kerr.NONE or principal is None:
                answers.append(partition_error(p["index"], code, message))
                continue
            answers.append(None)
            append = _append(
                ctx, principal, name, p["index"], p["records"], acks, timeout_s, qualified_txn
            )
            jobs.append((answers, len(answers) - 1, append))
    if len(jobs) == 1:  # the usual request: no task to gather
        done = [await jobs[0][2]]
    else:
        done = await asyncio.gather(*(job for _, _, job in jobs))
    for (answers, slot, _), answer in zip(jobs, done, strict=True):
        answers[slot] = answer
    throttle = ctx.broker.quotas.produce(principal, nbytes) if principal is not None else 0
    if acks == 0:
        failed = any(a["error_code"] for t in topics for a in t["partition_responses"])
        if failed:  # the producer reads no answer: closing makes it refresh its metadata
            ctx.transport.close()
        ctx.mute_ms = throttle  # no answer to carry it: the connection mutes all the same
        return None
    answer = {"responses": topics, "throttle_time_ms": throttle}
    if header.api_version >= 10:
        answer["node_endpoints"] = add_leader_hints(ctx, topics)
    return answer


def add_leader_hints(ctx: KafkaContext, topics: list[dict]) -> list[dict]:
    """KIP-951: partitions that moved name their new leader; its endpoint goes in the
    answer's ``node_endpoints``."""
    endpoints: dict[int, dict] = {}
    image = None
    for t in topics:
        for a in t["partition_responses"]:
            if a["error_code"] in MOVED:
                image = image or ctx.broker.image
                a["current_leader"], endpoint = leader_hint(image, t["name"], a["index"])
                if endpoint is not None:
                    endpoints[endpoint["node_id"]] = endpoint
    return list(endpoints.values())


async def init_producer_id(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    """A fresh producer id at epoch 0 for an idempotent producer. A producer asking again
    with its current id and epoch (v3+, KIP-360, after an error that lost its sequence)
    gets a fresh id too, as Kafka answers producers without a transactional id."""
    answer = {"throttle_time_ms": 0, "producer_id": -1, "producer_epoch": -1}
    if request["transactional_id"] is not None:
        return await transactions.init_transactional(ctx, request)
    try:
        ctx.authorize("IDEMPOTENT_WRITE", "cluster")
    except SluiceError as e:
        return {**answer, "error_code": kerr.kafka_code(e)}
    producer_id, epoch = await ctx.broker.init_producer_id()
    return {**answer, "error_code": kerr.NONE, "producer_id": producer_id, "producer_epoch": epoch}


HANDLERS: dict[int, Handler] = {
    apis.PRODUCE: produce,
    apis.INIT_PRODUCER_ID: init_producer_id,
}
