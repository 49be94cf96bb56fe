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
    """The peer address. Behind a proxy, the deployment sets REMOTE_ADDR (e.g. via the ASGI
    server's trusted-proxy option); X-Forwarded-For is not trusted here."""
    return request.META.get("REMOTE_ADDR") or None


def user_agent(request: Any) -> str:
    return (request.META.get("HTTP_USER_AGENT") or "")[:512]
