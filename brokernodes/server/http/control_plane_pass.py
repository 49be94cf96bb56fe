"""Confluent's admin resources through any broker: ``/v3/clusters...`` requests that are
not record routes, and REST Proxy v2's metadata reads (``GET /topics``, ``/topics/{t}``, its
partitions, ``/brokers``), passed to the control plane that serves them
(``backend.restproxy``), so a user given one broker URL reaches everything.

The request goes on as it came: method, path, query, body bytes (not decoded), and the
caller's own credentials and media types; the control plane authenticates, authorizes and
answers, and its status, media type and body bytes come back unchanged. ``X-Forwarded-Host``
names the host the client called, so the answer's links point at this broker. The routes are
installed after every other route (``app.build_app``): a more specific broker route (the v3
record routes, v2 produce) always wins.

A broker on a static metadata file has no control plane: 404 with a message saying so. A
control plane that cannot be reached is 503 CONTROL_PLANE_UNAVAILABLE (retriable). Refusals
made here use Confluent's body (``error_code`` integer, ``sluice_code`` string)."""

from __future__ import annotations

import logging
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import web

from brokernodes.server.broker import Broker
from brokernodes.server.http.body import read_body
from brokernodes.server.metadata.client import ControlPlaneMetadataSource
from brokernodes.server.protocol.request import SluiceRequest

logger = logging.getLogger("sluice.broker.http")

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
V3_PATHS = ("/v3/clusters", "/v3/clusters/{cluster}", "/v3/clusters/{cluster}/{tail:.+}")
V2_READS = (
    "/topics",
    "/topics/{topic}",
    "/topics/{topic}/partitions",
    "/topics/{topic}/partitions/{partition}",
    "/brokers",
)
REQUEST_HEADERS = ("Authorization", "Accept", "Content-Type", "User-Agent", "X-Sluice-Organisation")
ANSWER_HEADERS = ("Content-Type", "WWW-Authenticate", "Retry-After", "Allow")
TIMEOUT_S = 30.0  # a consumer-group read may ask several brokers in turn
NO_CONTROL_PLANE = (
    "this broker serves a static metadata file and has no control plane, which serves the "
    "v3 admin resources and v2 metadata; start brokers with --control-plane"
)


def confluent_error(status: int, code: int, sluice_code: str, message: str) -> web.Response:
    return web.json_response(
        {"error_code": code, "message": message, "sluice_code": sluice_code}, status=status
    )


def target_of(base: str, request: SluiceRequest) -> str:
    """The control plane's URL for ``request``: the same path and query."""
    query = urlencode(list(request.query.items()))
    return f"{base}{quote(request.path, safe='/:@-._~!$&()*+,;=')}" + (f"?{query}" if query else "")


def forwarded_headers(request: SluiceRequest) -> dict[str, str]:
    headers = {h: v for h in REQUEST_HEADERS if (v := request.headers.get(h)) is not None}
    host = request.headers.get("Host")
    if host:
        headers["X-Forwarded-Host"] = host
    headers["X-Forwarded-Proto"] = request.headers.get("X-Forwarded-Proto") or "http"
    if request.remote:
        headers["X-Forwarded-For"] = request.remote
    return headers


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config
    sessions: list[aiohttp.ClientSession] = []

    def session() -> aiohttp.ClientSession:
        # A connection per request: admin calls are rare, and a kept-alive connection to
        # the control plane's development server (which writes an answer's head and body
        # apart) waited out a delayed ACK on every request, ~50 ms against ~4 ms.
        if not sessions:
            connector = aiohttp.TCPConnector(force_close=True)
            sessions.append(aiohttp.ClientSession(connector=connector, auto_decompress=False))
        return sessions[0]

    async def close(_app: web.Application) -> None:
        for s in sessions:
            await s.close()

    async def pass_through(request: SluiceRequest) -> web.Response:
        source = broker.metadata
        if not isinstance(source, ControlPlaneMetadataSource):
            return confluent_error(404, 404, "NOT_FOUND", NO_CONTROL_PLANE)
        body = await read_body(
            request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
        )
        try:
            async with session().request(
                request.method,
                target_of(source.base, request),
                headers=forwarded_headers(request),
                data=bytes(body) if body else None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            ) as resp:
                raw = await resp.read()
                headers = {h: v for h in ANSWER_HEADERS if (v := resp.headers.get(h))}
                return web.Response(body=raw, status=resp.status, headers=headers)
        except (aiohttp.ClientError, TimeoutError) as e:
            logger.warning("admin request: the control plane could not be reached: %r", e)
            resp = confluent_error(
                503,
                503,
                "CONTROL_PLANE_UNAVAILABLE",
                "the control plane could not be reached; retry shortly",
            )
            resp.headers["Retry-After"] = "1"
            return resp

    for i, path in enumerate(V3_PATHS):
        for method in METHODS:
            name = f"control_plane_v3_{i}_{method.lower()}"
            app.router.add_route(method, path, pass_through, name=name)
    for i, path in enumerate(V2_READS):
        app.router.add_get(path, pass_through, name=f"control_plane_v2_{i}", allow_head=False)
    app.on_cleanup.append(close)
