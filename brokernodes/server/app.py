"""The aiohttp application: routes, and the middleware every request passes through
(latency histogram, error mapping to JSON bodies, request ids for unexpected failures).

``build_app`` installs the broker's own routes, then any ``RouteInstaller`` it is given:
that is how the process entry point (``brokernodes.broker_main``) adds the REST proxy
(``brokernodes.proxy``), which the broker core does not import."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable

from aiohttp import hdrs, web

from brokernodes.errors import (
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    RequestTooLargeError,
    SluiceError,
)
from brokernodes.server.auth import client_host, current_client_host
from brokernodes.server.broker import Broker
from brokernodes.server.connections import current_connection
from brokernodes.server.http import admin as http_admin
from brokernodes.server.http import broker_info as http_broker_info
from brokernodes.server.http import control_plane_pass
from brokernodes.server.http import cursors as http_cursors
from brokernodes.server.http import fetch as http_fetch
from brokernodes.server.http import forward as http_forward
from brokernodes.server.http import groups as http_groups
from brokernodes.server.http import produce as http_produce
from brokernodes.server.http import producers as http_producers
from brokernodes.server.http import replication as http_replication
from brokernodes.server.http import segments as http_segments
from brokernodes.server.http import transactions as http_transactions
from brokernodes.server.http import txn_markers as http_txn_markers
from brokernodes.server.http.util import BROKER_KEY, error_response
from brokernodes.server.protocol.confluent import is_confluent_path
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.ws import routes as ws_routes

logger = logging.getLogger("sluice.broker.http")

# adds routes (and startup or cleanup hooks) to the broker's app
RouteInstaller = Callable[[web.Application, Broker], None]


def _http_exception_error(exc: web.HTTPException, request: web.Request) -> SluiceError:
    if exc.status == 404:
        return NotFoundError(f"no route for {request.method} {request.path}")
    if exc.status == 405:
        allowed = ", ".join(sorted(getattr(exc, "allowed_methods", ()) or ()))
        return MethodNotAllowedError(
            f"{request.method} is not allowed on {request.path}"
            + (f"; use {allowed}" if allowed else "")
        )
    if exc.status == 413:
        return RequestTooLargeError("request body too large")
    err = SluiceError(exc.reason or "request failed")
    err.error_code = "INVALID_REQUEST" if exc.status < 500 else "UNKNOWN_SERVER_ERROR"
    return err


def check_request(request: web.Request, max_request_bytes: int) -> None:
    """What every route refuses before its handler runs: an HTTP/1.1 request without
    ``Host`` (RFC 9112 requires it), and a body announced over the request limit (413 on
    every route, also those that never read a body)."""
    if hdrs.HOST not in request.headers and getattr(request, "version", (1, 1)) >= (1, 1):
        raise InvalidRequestError("an HTTP/1.1 request needs a Host header (RFC 9112, 3.2)")
    length = request.content_length
    if length is not None and length > max_request_bytes:
        raise RequestTooLargeError(
            f"request body of {length} bytes is over this broker's limit of "
            f"{max_request_bytes} bytes; send smaller requests"
        )


def make_middleware(broker: Broker):
    """The middleware every request passes through, on either front; it hands handlers a
    ``SluiceRequest`` (the lean front builds one, aiohttp's ``web.Request`` is adapted)."""
    histogram = broker.metrics.request_seconds
    max_request_bytes = broker.config.max_request_bytes
    errors = broker.metrics.errors
    children: dict[str, object] = {}

    @web.middleware
    async def middleware(request: web.Request | SluiceRequest, handler):
        started = time.perf_counter()
        route = request.match_info.route
        endpoint = route.name or "unmatched"
        if request.__class__ is not SluiceRequest and not endpoint.startswith("ws_"):
            # handlers see one request type from either front; a WebSocket handler keeps
            # aiohttp's, which its upgrade needs (only aiohttp serves WebSockets)
            request = SluiceRequest.from_web(request)
        current_client_host.set(client_host(request.remote))  # for host-specific ACLs
        current_connection.set(request.transport)  # for connection-count quotas
        try:
            check_request(request, max_request_bytes)
            return await handler(request)
        except SluiceError as e:
            errors.labels(e.error_code).inc()
            return error_response(e, confluent=is_confluent_path(request.path))
        except web.HTTPException as e:
            if e.status < 400:
                raise
            err = _http_exception_error(e, request)
            errors.labels(err.error_code).inc()
            return error_response(err, confluent=is_confluent_path(request.path))
        except (ConnectionError, TimeoutError) as e:
            if isinstance(e, TimeoutError):
                err = SluiceError("the broker timed out serving this request")
                request_id = uuid.uuid4().hex[:16]
                logger.warning("request %s %s %s timed out", request_id, request.method, endpoint)
                return error_response(err, request_id, confluent=is_confluent_path(request.path))
            raise
        except Exception:
            request_id = uuid.uuid4().hex[:16]
            # Logs the route and path only: never headers (API keys) or bodies.
            logger.exception(
                "request %s failed: %s %s (%s)", request_id, request.method, request.path, endpoint
            )
            errors.labels("UNKNOWN_SERVER_ERROR").inc()
            return error_response(
                SluiceError(
                    f"unexpected broker error; quote request id {request_id} when reporting it"
                ),
                request_id,
                confluent=is_confluent_path(request.path),
            )
        finally:
            if not endpoint.startswith("ws_"):  # a WebSocket's lifetime is no request latency
                child = children.get(endpoint)
                if child is None:
                    child = children[endpoint] = histogram.labels(endpoint)
                child.observe(time.perf_counter() - started)  # type: ignore[attr-defined]

    return middleware


def build_app(broker: Broker, extra_routes: Iterable[RouteInstaller] = ()) -> web.Application:
    app = web.Application(middlewares=[make_middleware(broker)], client_max_size=2**63)
    app[BROKER_KEY] = broker
    http_admin.add_routes(app, broker)
    http_broker_info.add_routes(app, broker)
    http_produce.add_routes(app, broker)
    http_fetch.add_routes(app, broker)
    http_replication.add_routes(app, broker)
    http_groups.add_routes(app, broker)
    http_cursors.add_routes(app, broker)
    http_segments.add_routes(app, broker)
    http_producers.add_routes(app, broker)
    http_txn_markers.add_routes(app, broker)
    http_transactions.add_routes(app, broker)
    ws_routes.add_routes(app, broker)
    http_forward.install(app, broker)  # one front door: its client's connections
    for install in extra_routes:
        install(app, broker)
    control_plane_pass.add_routes(app, broker)  # last: every broker route wins over it
    return app
