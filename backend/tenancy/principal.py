"""The ``request.user`` of a request authenticated by an API key (no DRF imports here)."""

from __future__ import annotations

from typing import Any


class ServiceAccountPrincipal:
    """``request.user`` when an API key authenticated the request: a service account."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, service_account: Any, api_key: Any) -> None:
        self.service_account = service_account
        self.api_key = api_key

    def get_username(self) -> str:
        return f"service-account:{self.service_account.name}"

    def __str__(self) -> str:
        return self.get_username()
