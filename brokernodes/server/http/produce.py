"""Produce: JSON (Confluent REST v3 ``records`` and ``records:batch``) and binary batches.

The v3 answers are Confluent's (``error_code: 200`` on success, each record's cluster, topic,
partition, offset, timestamp and key/value sizes); several records in one ``records`` body
are Confluent's streaming mode (``produce_stream``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from brokernodes.errors import (
    InvalidRequestError,
    NotLeaderOrFollowerError,
    RequestTooLargeError,
    SluiceError,
)
from brokernodes.server.http import forward, produce_v2
from brokernodes.server.http.body import read_body
from brokernodes.server.http.forward import forwardable, forwarder, led_elsewhere
from brokernodes.server.http.produce_stream import (
    answer_records,
    answer_stream,
    read_records,
    stream_of,
)
from brokernodes.server.http.txn_produce import check_transactional
from brokernodes.server.http.util import (
    auth_header,
    check_cluster,
    error_response,
    json_answer,
    json_response,
    topic_partition,
)
from brokernodes.server.protocol.confluent import (
    JSON,
    check_content_type,
    confluent_error_body,
    is_confluent_path,
    negotiate,
)
from brokernodes.server.protocol.http1 import Answer
from brokernodes.server.protocol.json_records import (
    ProduceEntry,
    format_timestamp,
    parse_batch,
    parse_entry,
    parse_json,
    typed_size,
)
from brokernodes.server.protocol.params import acks_param
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.protocol.responses import batch_outcomes
from brokernodes.server.throttle import THROTTLE_HEADER

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker


def batch_failure(entry_id: str | None, error: SluiceError) -> dict:
    """A ``records:batch`` failure: Confluent's integer ``error_code`` and Sluice's code."""
    _, body = confluent_error_body(error)
    return {"id": entry_id, **body}


def throttled(resp: web.Response, throttle_ms: int) -> web.Response:
    """The response with the ``Sluice-Throttle-Time-Ms`` header (after the delay)."""
    resp.headers[THROTTLE_HEADER] = str(throttle_ms)
    return resp


JSON_ONLY = (JSON,)


def check_media(request: SluiceRequest) -> None:
    """Confluent's v3 record routes consume and answer ``application/json`` only (415 /
    406 otherwise); two header lookups on the fast path."""
    check_content_type(request.headers.get("Content-Type"), JSON_ONLY)
    negotiate(request.headers.get("Accept"), JSON_ONLY)


def record_answer(cluster_id: str, topic: str, result: Any, entry: ProduceEntry) -> dict:
    """Confluent's ``ProduceResponse`` for one appended record."""
    return {
        "error_code": 200,
        "cluster_id": cluster_id,
        "topic_name": topic,
        "partition_id": result.partition,
        "offset": result.offset,
        "timestamp": format_timestamp(result.timestamp),
        "key": typed_size(entry.key, entry.key_type),
        "value": typed_size(entry.value, entry.value_type),
    }


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config

    def record_producer(request: SluiceRequest, topic: str, principal: Any, acks: int):
        """One streamed record's bytes -> its answer (``produce_stream``); records for
        partitions led elsewhere are forwarded as a batch's are."""

        async def produce_one(raw: bytes) -> dict:
            broker.quotas.check_storage(principal)
            entry = parse_entry(parse_json(raw))
            (result,) = await forward.produce_entries(
                broker, request, topic, [entry], acks=acks, authorization=auth_header(request)
            )
            throttle = await broker.quotas.throttle_produce(principal, len(raw))
            if result.error is not None:
                raise result.error
            if acks == 0:
                return {}
            answer = record_answer(broker.image.cluster_id, topic, result, entry)
            answer["throttle_time_ms"] = throttle
            return answer

        return produce_one

    async def body_of(request: SluiceRequest) -> bytearray:
        return await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )

    async def expect_handler(request: web.Request) -> web.Response | None:
        """``Expect: 100-continue``: refuse an oversize body before the client sends it."""
        length = request.content_length
        confluent = is_confluent_path(request.path)
        if length is not None and length > config.max_request_bytes:
            return error_response(
                RequestTooLargeError(
                    f"request body of {length} bytes is over this broker's limit of "
                    f"{config.max_request_bytes} bytes; send smaller requests"
                ),
                confluent=confluent,
            )
        if request.headers.get("Expect", "").lower() != "100-continue":
            return error_response(
                InvalidRequestError("the only Expect value understood is 100-continue"),
                confluent=confluent,
            )
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
        return None

    async def produce_record(request: SluiceRequest) -> web.StreamResponse:
        check_cluster(broker, request)
        topic = request.match_info["topic"]
        principal = broker.authorize(auth_header(request), "WRITE", "topic", topic)
        check_media(request)  # after authentication, as Confluent's filters run first
        acks = acks_param(request.query)
        broker.image.topic(topic)  # 404 before reading the body
        if request.content_length is None:  # chunked: Confluent's streaming mode
            records = read_records(request.content, config.max_request_bytes, config.body_timeout_s)
            return await answer_stream(records, record_producer(request, topic, principal, acks))
        body = await body_of(request)
        broker.quotas.check_storage(principal)
        try:
            doc = parse_json(body)
        except InvalidRequestError:
            records = stream_of(body, config.max_request_bytes)
            if records is None:
                raise
            return await answer_records(records, record_producer(request, topic, principal, acks))
        entry = parse_entry(doc)
        (result,) = await broker.produce_entries(topic, [entry], acks=acks)
        if led_elsewhere(result.error) and forwardable(request):
            # one front door: the key's partition is led elsewhere (http/forward.py)
            return await forwarder(broker).forward(request, topic, result.partition, body)
        throttle = await broker.quotas.throttle_produce(principal, len(body))
        if result.error is not None:
            raise result.error
        if acks == 0:
            return throttled(json_response({}, 202), throttle)
        answer = record_answer(broker.image.cluster_id, topic, result, entry)
        answer["throttle_time_ms"] = throttle
        return throttled(json_response(answer), throttle)

    async def produce_batch(request: SluiceRequest) -> web.Response:
        check_cluster(broker, request)
        topic = request.match_info["topic"]
        principal = broker.authorize(auth_header(request), "WRITE", "topic", topic)
        check_media(request)  # after authentication, as Confluent's filters run first
        acks = acks_param(request.query)
        broker.image.topic(topic)
        body = await body_of(request)
        broker.quotas.check_storage(principal)
        good, bad = parse_batch(parse_json(body))
        # entries for partitions led elsewhere go on to their leaders (http/forward.py)
        results = await forward.produce_entries(
            broker, request, topic, good, acks=acks, authorization=auth_header(request)
        )
        throttle = await broker.quotas.throttle_produce(principal, len(body))
        cluster_id = broker.image.cluster_id
        successes = []
        failures = [batch_failure(entry_id, e) for entry_id, e in bad]
        for r in results:
            if r.error is not None:
                failures.append(batch_failure(r.entry.id, r.error))
            else:
                success = record_answer(cluster_id, topic, r, r.entry)
                del success["error_code"]
                successes.append({"id": r.entry.id, **success})
        return throttled(
            json_response(
                {"successes": successes, "failures": failures, "throttle_time_ms": throttle}, 207
            ),
            throttle,
        )

    async def produce_batches(request: SluiceRequest) -> web.StreamResponse | Answer:
        topic, p = topic_partition(request)
        principal = broker.authorize(auth_header(request), "WRITE", "topic", topic)
        acks = acks_param(request.query)
        try:
            partition = broker.replicas.get_partition(topic, p)  # 404 / 421 before the body
        except NotLeaderOrFollowerError:
            if not forwardable(request):
                raise
            # one front door: the leader answers (http/forward.py)
            return await forwarder(broker).forward(request, topic, p, await body_of(request))
        body = await body_of(request)
        if not body:
            raise InvalidRequestError(
                "body: empty; send one or more RecordBatch v2 batches back to back"
            )
        await check_transactional(
            broker, request, topic, partition, body, request.query.get("transactional_id")
        )
        nbytes = len(body)
        result = await broker.append_batches(principal, partition, topic, body, acks=acks)
        throttle = await broker.quotas.throttle_produce(principal, nbytes)
        if acks == 0:
            return json_answer({}, 202, throttle)
        answer = {
            "base_offset": result.base_offset,
            "last_offset": result.last_offset,
            "log_append_time": result.log_append_time,
            "log_start_offset": result.log_start_offset,
            "duplicate": result.duplicate,
            "throttle_time_ms": throttle,
        }
        if result.batches is not None:
            answer["batches"] = batch_outcomes(result.batches)
        return json_answer(answer, throttle_ms=throttle)  # written by the lean front as is

    base = "/v3/clusters/{cluster}/topics/{topic}"
    add = app.router.add_post
    add(base + "/records", produce_record, name="produce_json", expect_handler=expect_handler)
    add(
        base + "/records:batch",
        produce_batch,
        name="produce_json_batch",
        expect_handler=expect_handler,
    )
    add(
        "/sluice/v1/topics/{topic}/partitions/{partition}/batches",
        produce_batches,
        name="produce_binary",
        expect_handler=expect_handler,
    )
    produce_v2.add_routes(app, broker)  # Confluent's v2 produce, beside v3
