"""The usual Produce request, in front of the general handler (``produce.py``).

A producer with linger.ms 0 sends one partition per request with acks 1 or all and no
transactional id. For that request this takes the general handler's steps in its order
(authorize the topic, append through ``produce._append``, the byte-rate quota) without the
per-topic bookkeeping, and answers a success with bytes encoded directly
(``protocol.kafka.produce_answer``), not through the generated encoder. Anything else, and
every answer with an error, is the general handler's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.server.kafka.context import EncodedAnswer, Handler, KafkaContext
from brokernodes.server.kafka.handlers import produce as general
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.produce_answer import encode_single_answer

if TYPE_CHECKING:
    from brokernodes.server.protocol.kafka.frames import RequestHeader


async def produce(
    ctx: KafkaContext, header: RequestHeader, request: dict
) -> dict | EncodedAnswer | None:
    acks = request["acks"]
    topic_data = request["topic_data"]
    if (
        (acks != 1 and acks != -1)
        or len(topic_data) != 1
        or request.get("transactional_id") is not None
    ):
        return await general.produce(ctx, header, request)
    t = topic_data[0]
    name, parts = t["name"], t["partition_data"]
    if len(parts) != 1 or name in INTERNAL_TOPICS:
        return await general.produce(ctx, header, request)
    p = parts[0]
    index, records = p["index"], p["records"]
    try:
        principal = ctx.authorize("WRITE", "topic", name)
    except SluiceError as e:
        answer = general.partition_error(index, kerr.kafka_code(e), e.message)
        return _dict_answer(ctx, header, name, answer, 0)
    timeout_s = max(request["timeout_ms"], 0) / 1000
    answer = await general._append(ctx, principal, name, index, records, acks, timeout_s)
    throttle = ctx.broker.quotas.produce(principal, len(records) if records is not None else 0)
    if answer["error_code"] != kerr.NONE:
        return _dict_answer(ctx, header, name, answer, throttle)
    body = encode_single_answer(
        header.api_version,
        name,
        index,
        answer["base_offset"],
        answer["log_append_time_ms"],
        answer["log_start_offset"],
        throttle,
    )
    return EncodedAnswer([body], len(body), throttle)


def _dict_answer(
    ctx: KafkaContext, header: RequestHeader, name: str, answer: dict, throttle: int
) -> dict:
    """An answer with an error, as the general handler builds it (KIP-951 hints too)."""
    topics = [{"name": name, "partition_responses": [answer]}]
    body = {"responses": topics, "throttle_time_ms": throttle}
    if header.api_version >= 10:
        body["node_endpoints"] = general.add_leader_hints(ctx, topics)
    return body


HANDLERS: dict[int, Handler] = {apis.PRODUCE: produce}
