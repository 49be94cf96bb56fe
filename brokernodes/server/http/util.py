"""Helpers the HTTP handler modules share: JSON answers, error answers, path checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson
from aiohttp import web
from multidict import CIMultiDict

from brokernodes.errors import (
    RequestTimedOutError,
    RequestTooLargeError,
    SluiceError,
    UnknownClusterError,
)
from brokernodes.server.protocol.confluent import confluent_error_body
from brokernodes.server.protocol.http1 import Answer
from brokernodes.server.protocol.params import partition_param
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.protocol.responses import error_body, status_for
from brokernodes.server.throttle import THROTTLE_HEADER

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

BROKER_KEY: web.AppKey[Broker] = web.AppKey("broker")
# called before /metrics renders (the request latencies counted in batches: app.LatencyBatch)
BEFORE_METRICS_KEY: web.AppKey[Callable[[], None]] = web.AppKey("before_metrics")
JSON = "application/json"
# what a handler is handed: a SluiceRequest, or aiohttp's request on a WebSocket route
AnyRequest = SluiceRequest | web.BaseRequest


def json_response(body: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


_JSON_HEADERS = (("Content-Type", JSON),)


def json_answer(body: object, status: int = 200, throttle_ms: int | None = None) -> Answer:
    """``json_response`` as the lean front's ``Answer`` (with ``Sluice-Throttle-Time-Ms``
    when ``throttle_ms`` is given): for the routes answered most often, whose answer the
    lean front writes without building aiohttp's response object."""
    headers = (
        _JSON_HEADERS
        if throttle_ms is None
        else (("Content-Type", JSON), (THROTTLE_HEADER, str(throttle_ms)))
    )
    return Answer(status, headers, orjson.dumps(body))


def web_response(answer: Answer) -> web.Response:
    """An ``Answer`` as aiohttp's response (a request the full server serves)."""
    return web.Response(body=answer.body, status=answer.status, headers=CIMultiDict(answer.headers))


def error_response(
    error: SluiceError, request_id: str | None = None, *, confluent: bool = False
) -> web.Response:
    """The error's JSON answer; on a Confluent route (``confluent``) with Confluent's
    integer ``error_code`` and Sluice's string as ``sluice_code`` (``protocol.confluent``)."""
    if confluent:
        status, body = confluent_error_body(error)
    else:
        status, body = status_for(error.error_code), error_body(error)
    if request_id is not None:
        body["request_id"] = request_id
    resp = json_response(body, status)
    if isinstance(error, RequestTooLargeError | RequestTimedOutError):
        resp.force_close()  # the rest of the body is not read; this connection is done
    return resp


def check_cluster(broker: Broker, request: AnyRequest) -> None:
    cluster = request.match_info.get("cluster")
    if cluster is not None and cluster != broker.image.cluster_id:
        raise UnknownClusterError(
            f"cluster {cluster!r} is not served here; this broker belongs to cluster "
            f"{broker.image.cluster_id!r}"
        )


def topic_partition(request: AnyRequest) -> tuple[str, int]:
    """(topic, partition) from the path."""
    return request.match_info["topic"], partition_param(request.match_info["partition"])


def auth_header(request: AnyRequest) -> str | None:
    return request.headers.get("Authorization")
