"""Per-tenant caps on what a broker holds open for its clients, under a per-broker ceiling.

A broker keeps state for two kinds of long-lived client objects: REST consumer instances
(each a group member with its own fetch loop) and WebSocket streams (produce, consume, the
console's live tail, group streams). Both used to be capped per broker only, so one tenant
holding them all locked every other tenant out. Now each tenant has its own cap:

- its quota (``consumer_instances`` / ``streams``, set in the control plane as
  ``max_consumer_instances`` / ``max_streams``; a service account's quota caps that account
  within the tenant), or when it has none, the broker's per-tenant default;
- the broker's total stays as a safety ceiling over all tenants together (memory and file
  descriptors), so the defaults let several tenants fill their caps before it is reached.

A request over a cap is refused with HTTP 429 (``TOO_MANY_CONSUMER_INSTANCES`` or
``TOO_MANY_STREAMS``; a stream already upgraded closes with 4429 after that error), naming
the cap, who hit it (``tenant``, ``principal`` or ``broker``) and the numbers. 429, not 403:
the caller can retry once it closes instances or streams (or they idle out).

Settings (environment, read when a broker starts): ``SLUICE_MAX_CONSUMER_INSTANCES`` (1000),
``SLUICE_MAX_CONSUMER_INSTANCES_PER_TENANT`` (100), ``SLUICE_MAX_STREAMS`` (4000),
``SLUICE_MAX_STREAMS_PER_TENANT`` (400). Cursors hold nothing on the broker (the position
travels in the signed cursor), so they need no cap: their reads count against the request
and byte-rate quotas like any fetch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError

if TYPE_CHECKING:
    from brokernodes.security.quotas import QuotaManager


class TooManyError(SluiceError):
    """A cap on open consumer instances or streams; ``details`` names it."""

    def __init__(self, cap: str, scope: str, used: int, limit: int, message: str) -> None:
        super().__init__(message)
        self.cap = cap
        self.scope = scope
        self.used = used
        self.limit = limit

    @property
    def details(self) -> dict[str, object]:
        return {"cap": self.cap, "scope": self.scope, "used": self.used, "limit": self.limit}


class TooManyConsumerInstancesError(TooManyError):
    error_code = "TOO_MANY_CONSUMER_INSTANCES"


class TooManyStreamsError(TooManyError):
    error_code = "TOO_MANY_STREAMS"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = int(raw)
    if value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, not {raw!r}")
    return value


@dataclass(frozen=True)
class TenantCap:
    """One kind of held object: its quota name, default per tenant, ceiling per broker."""

    quota: str  # ClientQuotas field: "consumer_instances" or "streams"
    what: str  # how a message names them
    per_tenant: int
    total: int
    error: type[TooManyError]

    def check(
        self,
        manager: QuotaManager | None,
        tenant: str | None,
        principal: str | None,
        *,
        tenant_used: int,
        principal_used: int,
        total_used: int,
    ) -> None:
        """Raise when one more would pass the broker's ceiling, the tenant's cap (its quota,
        else the default) or the principal's quota."""
        if total_used >= self.total:
            raise self.error(
                self.quota,
                "broker",
                total_used,
                self.total,
                f"this broker holds {total_used} {self.what}, its limit for all tenants "
                "together; try another broker or retry later",
            )
        limit = self.per_tenant
        account_limit = None
        if manager is not None and tenant is not None:
            own = getattr(manager.quotas(tenant), self.quota)
            limit = self.per_tenant if own is None else own
            if principal is not None:
                account_limit = getattr(manager.quotas(tenant, principal), self.quota)
        if tenant_used >= limit:
            raise self.error(
                self.quota,
                "tenant",
                tenant_used,
                limit,
                f"your organisation already holds {tenant_used} {self.what} on this broker, "
                f"its limit; close some (or let idle ones expire) and retry, or ask for a "
                f"larger max_{self.quota} quota",
            )
        if account_limit is not None and principal_used >= account_limit:
            raise self.error(
                self.quota,
                "principal",
                principal_used,
                account_limit,
                f"{principal} already holds {principal_used} {self.what} on this broker, its "
                f"quota; close some and retry, or ask an admin to raise max_{self.quota}",
            )


def consumer_instances_cap() -> TenantCap:
    return TenantCap(
        "consumer_instances",
        "REST consumer instances",
        _env_int("SLUICE_MAX_CONSUMER_INSTANCES_PER_TENANT", 100),
        _env_int("SLUICE_MAX_CONSUMER_INSTANCES", 1000),
        TooManyConsumerInstancesError,
    )


def streams_cap() -> TenantCap:
    return TenantCap(
        "streams",
        "WebSocket streams",
        _env_int("SLUICE_MAX_STREAMS_PER_TENANT", 400),
        _env_int("SLUICE_MAX_STREAMS", 4000),
        TooManyStreamsError,
    )
