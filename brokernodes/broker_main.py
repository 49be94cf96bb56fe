"""One broker node as ``python -m brokernodes`` runs it: the broker (``brokernodes.server``)
with the REST proxy's routes (``brokernodes.proxy``) installed into its app.

The assembly lives here, outside the broker core, because the proxy runs the SDK's consumers
and the core never imports the SDK (an import-linter contract).
"""

from __future__ import annotations

from brokernodes import proxy
from brokernodes.server.app import RouteInstaller
from brokernodes.server.main import main as serve_broker

ROUTES: tuple[RouteInstaller, ...] = (proxy.add_routes,)


def main(argv: list[str] | None = None) -> int:
    return serve_broker(argv, ROUTES)
