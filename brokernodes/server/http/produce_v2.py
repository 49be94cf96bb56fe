"""Confluent REST Proxy v2 produce: ``POST /topics/{topic}`` and
``POST /topics/{topic}/partitions/{partition}`` (bodies and answers: ``protocol.v2_produce``).

The records go through the same path as a v3 ``records:batch`` (one append per partition,
records for partitions led elsewhere forwarded to their leaders). An unknown topic is
Confluent's 404 / 40401, a partition the topic does not have 404 / 40402.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.errors import UnknownTopicOrPartitionError
from brokernodes.server.http import forward
from brokernodes.server.http.body import read_body
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol import v2_produce
from brokernodes.server.protocol.confluent import check_content_type, negotiate
from brokernodes.server.protocol.json_records import parse_json
from brokernodes.server.protocol.params import acks_param, partition_param
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.throttle import THROTTLE_HEADER

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402


def _not_found(error: UnknownTopicOrPartitionError, code: int) -> UnknownTopicOrPartitionError:
    error.confluent_code = code  # type: ignore[attr-defined]
    return error


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config

    async def produce(request: SluiceRequest) -> web.Response:
        topic = request.match_info["topic"]
        principal = broker.authorize(auth_header(request), "WRITE", "topic", topic)
        media = check_content_type(request.headers.get("Content-Type"), v2_produce.CONSUMED)
        answered = negotiate(request.headers.get("Accept"), v2_produce.ANSWERED)
        acks = acks_param(request.query)
        try:
            info = broker.image.topic(topic)
        except UnknownTopicOrPartitionError as e:
            raise _not_found(e, TOPIC_NOT_FOUND) from None
        path_partition = request.match_info.get("partition")
        partition = None if path_partition is None else partition_param(path_partition)
        body = await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )
        broker.quotas.check_storage(principal)
        fmt = v2_produce.embedded_format(media)
        entries = v2_produce.parse_records(parse_json(body), fmt, partition=partition)
        count = len(info.partitions)
        for entry in entries:
            if entry.partition is not None and entry.partition >= count:
                raise _not_found(
                    UnknownTopicOrPartitionError(
                        f"topic {topic!r} has partitions 0..{count - 1}, not {entry.partition}"
                    ),
                    PARTITION_NOT_FOUND,
                )
        results = await forward.produce_entries(
            broker, request, topic, entries, acks=acks, authorization=auth_header(request)
        )
        throttle = await broker.quotas.throttle_produce(principal, len(body))
        resp = json_response(v2_produce.answer(results))
        resp.content_type = answered
        resp.headers[THROTTLE_HEADER] = str(throttle)
        return resp

    app.router.add_post("/topics/{topic}", produce, name="v2_produce")
    app.router.add_post(
        "/topics/{topic}/partitions/{partition}", produce, name="v2_produce_partition"
    )
