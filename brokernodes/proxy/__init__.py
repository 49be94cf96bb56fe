"""The REST proxy: consumption that runs the SDK's group consumer on a client's behalf.

Confluent REST Proxy v2 consumer instances (``rest_consumers``) and WebSocket group streams
(``group_streams``) each hold an SDK consumer (``brokernodes.client``) inside the broker
process, acting with the caller's key against the cluster's public API. They depend on the
client and on the broker's shell (authorization, request bodies, socket shell, caps); the
broker core (``brokernodes.server``) imports neither the client nor this package, an
import-linter contract. The process entry point (``brokernodes.broker_main``) installs
these routes into the broker's app with ``add_routes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokernodes.proxy import group_streams, rest_consumers

if TYPE_CHECKING:
    from aiohttp import web

    from brokernodes.server.broker import Broker


def add_routes(app: web.Application, broker: Broker) -> None:
    """Install the REST v2 consumer instances and the WebSocket group streams."""
    rest_consumers.add_routes(app, broker)
    group_streams.add_routes(app, broker)
