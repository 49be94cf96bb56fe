"""Adds the produce and consume WebSocket streams to the app, with the
``sluice_websocket_connections{stream}`` gauge and the shutdown hook that closes open
streams (1001) and waits for them, the proxy's group streams among them (every stream is in
``broker.websockets``). ``app.build_app`` calls ``add_routes``; the streams' shared socket
lives in ``ws.socket``, which imports neither stream."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokernodes.server.ws import consume as ws_consume
from brokernodes.server.ws import produce as ws_produce
from brokernodes.server.ws_registry import CLOSE_GOING_AWAY, WebSocketRegistry

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.broker.ws")

SHUTDOWN_WAIT_S = 5.0
STREAMS = ("produce", "consume")


class _ConnectionsCollector(Collector):
    def __init__(self, registry: WebSocketRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[GaugeMetricFamily]:
        g = GaugeMetricFamily(
            "sluice_websocket_connections", "Open WebSocket streams", labels=["stream"]
        )
        for stream in STREAMS:
            g.add_metric([stream], self._registry.count(stream))
        yield g


def add_routes(app: web.Application, broker: Broker) -> None:
    registry = broker.websockets
    broker.metrics.registry.register(_ConnectionsCollector(registry))

    async def on_shutdown(_app: web.Application) -> None:
        n = registry.close_all(CLOSE_GOING_AWAY)
        if n:
            logger.info("closing %d WebSocket stream(s): broker shutting down", n)
            await registry.wait_closed(SHUTDOWN_WAIT_S)

    app.on_shutdown.append(on_shutdown)
    ws_produce.add_routes(app, broker)
    ws_consume.add_routes(app, broker)
