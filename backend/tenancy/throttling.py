"""The sign-in throttle, keyed on the client address as ``backend.core.client_address``
decides it. DRF's own ``get_ident`` takes X-Forwarded-For as sent (NUM_PROXIES unset), so a
client could pick a fresh key per request and never be throttled."""

from __future__ import annotations

from rest_framework.throttling import ScopedRateThrottle

from backend.core.context import client_ip


class LoginRateThrottle(ScopedRateThrottle):
    def get_ident(self, request) -> str:
        return client_ip(request) or "unknown"
