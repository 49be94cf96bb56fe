"""Produce (v3-11) and InitProducerId (v0-5).

Each partition's record batches are appended exactly as the binary HTTP produce appends them
(``Broker.append_batches``: storage quota, leader append with idempotent deduplication,
acks 0/1/all), the partitions of a request in parallel. Errors are per partition, as Kafka
answers them. The produce byte-rate quota is computed, not slept: ``throttle_time_ms`` mutes
the connection after the answer (KIP-219). acks=0 gets no answer (the connection still
mutes for the throttle); if a partition failed then, the connection is closed (as Kafka
does) so the producer refreshes its metadata.

Transactions are not supported yet: a transactional produce (a ``transactional_id``, or a
transactional or control batch) and an InitProducerId naming a transactional id are answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as a fatal, non-retriable error.
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
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS, leader_hint
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr

if TYPE_CHECKING:
    from brokernodes.server.auth import Principal
    from brokernodes.server.protocol.kafka.frames import RequestHeader

logger = logging.getLogger("sluice.kafka")

ACKS = frozenset({0, 1, -1})  # -1: all in-sync replicas
MOVED = frozenset({kerr.NOT_LEADER_OR_FOLLOWER, kerr.FENCED_LEADER_EPOCH})
NO_TRANSACTIONS = (
    "transactions are not supported by this cluster yet; use an idempotent producer "
    "(enable.idempotence=true) without transactional.id"
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
) -> dict:
    broker = ctx.broker
    try:
        if records is not None and has_transactional_batch(records):
            return partition_error(
                index, kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS
            )
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
        elif transactional:
            code, message = kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_TRANSACTIONS
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
            append = _append(ctx, principal, name, p["index"], p["records"], acks, timeout_s)
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
        return {**answer, "error_code": kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
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
