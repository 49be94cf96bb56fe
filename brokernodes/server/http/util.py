"""Helpers the HTTP handler modules share: JSON answers, error answers, path checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from aiohttp import web

from brokernodes.errors import (
    RequestTimedOutError,
    RequestTooLargeError,
    SluiceError,
    UnknownClusterError,
)
from brokernodes.server.protocol.confluent import confluent_error_body
from brokernodes.server.protocol.params import partition_param
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.protocol.responses import error_body, status_for

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

BROKER_KEY: web.AppKey[Broker] = web.AppKey("broker")
JSON = "application/json"
# what a handler is handed: a SluiceRequest, or aiohttp's request on a WebSocket route
AnyRequest = SluiceRequest | web.BaseRequest


def json_response(body: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


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
