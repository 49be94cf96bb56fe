"""A producer's progress on one partition: ``GET .../partitions/{p}/producers/{producer_id}``.

What Kafka's DescribeProducers answers for one producer id: its epoch, the last sequence and
offset it appended here and where that last batch starts, from the leader's
idempotent-producer state (``brokernodes.storage.producer_state``), plus the partition's
high watermark. A writer that chose its own producer identity (the Spark sink,
docs/analytics.md) asks this before a retried task resends, so it starts after what an
earlier attempt already appended. Allowed to a principal that may WRITE the topic: it
describes the caller's own writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.errors import InvalidRequestError
from brokernodes.server.http.util import auth_header, json_response, topic_partition
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.storage.producer_state import NO_PRODUCER_EPOCH, NO_SEQUENCE

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

PATH = "/sluice/v1/topics/{topic}/partitions/{partition}/producers/{producer_id}"


def describe(state, producer_id: int, high_watermark: int) -> dict:
    """The answer for ``producer_id`` from a partition's ``ProducerStateManager``: epoch -1
    and sequence -1 when it holds nothing of that producer."""
    entry = state.last_entry(producer_id)
    last = entry.batches[-1] if entry is not None and entry.batches else None
    return {
        "producer_id": producer_id,
        "producer_epoch": entry.producer_epoch if last else NO_PRODUCER_EPOCH,
        "last_sequence": last.last_seq if last else NO_SEQUENCE,
        "last_offset": last.last_offset if last else -1,
        # the last batch's first sequence and offset: where to read it back
        "last_batch_first_sequence": last.first_seq if last else NO_SEQUENCE,
        "last_batch_first_offset": last.first_offset if last else -1,
        "high_watermark": high_watermark,
    }


def add_routes(app: web.Application, broker: Broker) -> None:
    async def describe_producer(request: SluiceRequest) -> web.Response:
        topic, p = topic_partition(request)
        broker.authorize(auth_header(request), "WRITE", "topic", topic)
        raw = request.match_info["producer_id"]
        try:
            producer_id = int(raw)
        except ValueError:
            producer_id = -1
        if producer_id < 0:
            raise InvalidRequestError(
                f"producer id {raw!r} is not a non-negative integer (a producer id from "
                "POST /sluice/v1/producer-ids or one the client chose)"
            )
        part = broker.replicas.get_partition(topic, p)  # the leader's, or NOT_LEADER
        return json_response(describe(part.producer_state, producer_id, part.log.high_watermark))

    app.router.add_get(PATH, describe_producer, name="describe_producer")
