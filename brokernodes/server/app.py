"""The aiohttp application: routes, and the middleware every request passes through
(latency histogram, error mapping to JSON bodies, request ids for unexpected failures).

``build_app`` installs the broker's own routes, then any ``RouteInstaller`` it is given:
that is how the process entry point (``brokernodes.broker_main``) adds the REST proxy
(``brokernodes.proxy``), which the broker core does not import."""

from __future__ import annotations

import logging
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

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
from brokernodes.server.http.util import (
    BEFORE_METRICS_KEY,
    BROKER_KEY,
    error_response,
    web_response,
)
from brokernodes.server.protocol.confluent import is_confluent_path
from brokernodes.server.protocol.http1 import Answer
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.ws import routes as ws_routes

logger = logging.getLogger("sluice.broker.http")

# adds routes (and startup or cleanup hooks) to the broker's app
RouteInstaller = Callable[[web.Application, Broker], None]
LATENCY_BATCH = 64  # observations of one endpoint counted before they go to the histogram


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


class LatencyBatch:
    """``sluice_request_seconds`` observations counted here per endpoint and added to the
    histogram in batches: every ``LATENCY_BATCH`` requests of an endpoint and whenever the
    metrics are rendered (``flush``, called by ``/metrics`` before it answers).

    Why: prometheus_client takes a lock for the bucket and another for the sum on every
    ``observe``, about a microsecond per request on the routes clients send all the time;
    here a request costs a bisect and two additions. The histogram's bucket bounds, bucket
    counters and sum are prometheus_client's (pinned in pyproject), updated as its own
    ``observe`` updates them (the first bucket whose bound is at least the value)."""

    __slots__ = ("_histogram", "_pending")

    def __init__(self, histogram: Any) -> None:
        self._histogram = histogram
        # endpoint -> [child, per-bucket counts, sum, observations]
        self._pending: dict[str, list[Any]] = {}

    def observe(self, endpoint: str, seconds: float) -> None:
        entry = self._pending.get(endpoint)
        if entry is None:
            child = self._histogram.labels(endpoint)
            entry = self._pending[endpoint] = [child, [0] * len(child._upper_bounds), 0.0, 0]
        entry[1][bisect_left(entry[0]._upper_bounds, seconds)] += 1
        entry[2] += seconds
        entry[3] += 1
        if entry[3] >= LATENCY_BATCH:
            self._flush(entry)

    def flush(self) -> None:
        """Add every pending observation to the histogram."""
        for entry in self._pending.values():
            if entry[3]:
                self._flush(entry)

    @staticmethod
    def _flush(entry: list[Any]) -> None:
        child, counts, total = entry[0], entry[1], entry[2]
        buckets = child._buckets
        for i, n in enumerate(counts):
            if n:
                buckets[i].inc(n)
                counts[i] = 0
        child._sum.inc(total)
        entry[2] = 0.0
        entry[3] = 0


def make_middleware(broker: Broker, latency: LatencyBatch | None = None):
    """The middleware every request passes through, on either front; it hands handlers a
    ``SluiceRequest`` (the lean front builds one, aiohttp's ``web.Request`` is adapted).
    Latencies go to ``latency`` (one of its own if none is given)."""
    observe = (latency or LatencyBatch(broker.metrics.request_seconds)).observe
    max_request_bytes = broker.config.max_request_bytes
    errors = broker.metrics.errors

    @web.middleware
    async def middleware(request: web.Request | SluiceRequest, handler):
        started = time.perf_counter()
        route = request.match_info.route
        endpoint = route.name or "unmatched"
        web_front = request.__class__ is not SluiceRequest
        if web_front and not endpoint.startswith("ws_"):
            # handlers see one request type from either front; a WebSocket handler keeps
            # aiohttp's, which its upgrade needs (only aiohttp serves WebSockets)
            request = SluiceRequest.from_web(request)
        current_client_host.set(client_host(request.remote))  # for host-specific ACLs
        current_connection.set(request.transport)  # for connection-count quotas
        try:
            check_request(request, max_request_bytes)
            resp = await handler(request)
            if web_front and resp.__class__ is Answer:  # the lean front's answer type
                return web_response(resp)
            return resp
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
                observe(endpoint, time.perf_counter() - started)

    return middleware


def build_app(broker: Broker, extra_routes: Iterable[RouteInstaller] = ()) -> web.Application:
    latency = LatencyBatch(broker.metrics.request_seconds)
    app = web.Application(middlewares=[make_middleware(broker, latency)], client_max_size=2**63)
    app[BROKER_KEY] = broker
    app[BEFORE_METRICS_KEY] = latency.flush
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
