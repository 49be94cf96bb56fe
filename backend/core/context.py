"""Who is acting, for which organisation, from where: what every service call receives.

The tenant choke point (``backend.tenancy.permissions``) builds one ``RequestContext`` per
request; services take it as ``ctx`` so they can scope their writes and record the audit trail.
Management commands and tests build one directly (``RequestContext.system(...)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestContext:
    organisation: Any  # backend.tenancy.models.Organisation (or None for platform actions)
    role: str = ""  # owner | admin | member | read-only | staff | system
    user: Any = None  # django.contrib.auth User, when a person acts
    service_account: Any = None  # backend.tenancy.models.ServiceAccount, when a key acts
    api_key_id: str = ""
    ip: str | None = None
    user_agent: str = ""

    @property
    def actor_label(self) -> str:
        if self.service_account is not None:
            return f"service-account:{self.service_account.name}"
        if self.user is not None:
            return f"user:{self.user.get_username()}"
        return "system"

    @classmethod
    def system(cls, organisation: Any = None, *, role: str = "system") -> RequestContext:
        return cls(organisation=organisation, role=role)


def client_ip(request: Any) -> str | None:
    """The client's address: the peer's, or behind a trusted proxy (``SLUICE_TRUSTED_PROXIES``)
    the one the proxies recorded in X-Forwarded-For (``backend.core.client_address``)."""
    from django.conf import settings

    from backend.core.client_address import client_address, parse_networks

    meta = getattr(request, "META", request)
    return client_address(
        meta.get("REMOTE_ADDR"),
        meta.get("HTTP_X_FORWARDED_FOR"),
        parse_networks(tuple(getattr(settings, "SLUICE_TRUSTED_PROXIES", ()))),
    )


def user_agent(request: Any) -> str:
    return (request.META.get("HTTP_USER_AGENT") or "")[:512]
