"""Exact Origin checks for the console's WebSockets.

Channels' ``AllowedHostsOriginValidator`` compares only the Origin's host with
ALLOWED_HOSTS, so a page served from another port of the same host (another local service,
another user's dev server) could open the live tail with the person's session cookie. Here
the Origin must be the console's own origin (scheme, host and port of the request's Host
header) or one listed in ``CSRF_TRUSTED_ORIGINS`` (a TLS proxy's public origin).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin, the default port made explicit; None when it is
    not an http(s) origin (``null``, a path, a bad port)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.username is not None or parts.query or parts.fragment:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def origin_allowed(scope: dict, trusted: Iterable[str] = ()) -> bool:
    """Whether the WebSocket handshake in ``scope`` comes from the console's own origin or a
    trusted one. A handshake without Origin (not a browser) is refused too: the console's
    sockets are for its pages."""
    origin = _header(scope, b"origin")
    got = normalise(origin) if origin else None
    if got is None:
        return False
    host = _header(scope, b"host")
    if host:
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        if normalise(f"{scheme}://{host}") == got:
            return True
    return any(normalise(t) == got for t in trusted)
