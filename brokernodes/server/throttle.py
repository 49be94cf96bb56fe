"""Quota enforcement on the broker: the glue between the pure ``QuotaManager``
(``brokernodes.security.quotas``) and the request handlers.

- **Rates** (Kafka's way, KIP-13 / KIP-219): a handler does its work, then records the
  request's bytes (produce: the request body; fetch: the bytes returned) and one request in
  the broker's ``QuotaManager``; the larger throttle time of the byte rate and the request
  rate is how long the *response* is held back (``asyncio.sleep`` in that request's task, so
  only that connection waits) and is reported as ``throttle_time_ms``. WebSocket streams delay
  their next ack or message the same way.
- **Storage**: produce is refused with ``QUOTA_EXCEEDED`` (403) while the tenant's stored
  bytes *on this broker* (the sum of its partition logs' sizes here) are at or over its
  ``storage_bytes`` limit.
- **Connections** (``max_connections``): ``brokernodes.server.connections``.

Quotas come from the metadata image: each tenant view's ``quotas`` records (the control
plane's names, ``produce_bytes_per_sec``...), re-read whenever the image's version changes.
Keys without a tenant (static-file brokers) are never throttled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from brokernodes.security.quotas import (
    ClientQuotas,
    QuotaExceededError,
    QuotaKind,
    QuotaManager,
)

if TYPE_CHECKING:
    from brokernodes.server.auth import Principal
    from brokernodes.server.metadata.cluster import ClusterMetadata
    from brokernodes.server.metrics import BrokerMetrics

logger = logging.getLogger("sluice.broker.quotas")

# control-plane quota field -> ClientQuotas field
LIMIT_NAMES: Mapping[str, str] = {
    "produce_bytes_per_sec": "producer_byte_rate",
    "fetch_bytes_per_sec": "consumer_byte_rate",
    "request_rate": "request_rate",
    "storage_bytes": "storage_bytes",
    "max_topics": "topics",
    "max_partitions": "partitions",
    "max_connections": "connections",
    "max_consumer_instances": "consumer_instances",
    "max_streams": "streams",
}
_RATES = frozenset(k.value for k in QuotaKind)
EXPIRE_INTERVAL_S = 60.0
THROTTLE_HEADER = "Sluice-Throttle-Time-Ms"


def client_quotas(limits: Mapping[str, Any]) -> ClientQuotas:
    """A quota record's ``limits`` (control-plane names; Kafka names accepted too) as
    ``ClientQuotas``. A rate of 0 becomes 1 per second (the most a rate can block)."""
    values: dict[str, Any] = {}
    for name, value in (limits or {}).items():
        field = LIMIT_NAMES.get(name, name)
        if field not in ClientQuotas.__dataclass_fields__ or value is None:
            continue
        if field in _RATES and value <= 0:
            value = 1
        values[field] = value
    return ClientQuotas(**values)


def quota_entries(image: ClusterMetadata) -> Iterable[tuple[str, str | None, ClientQuotas]]:
    """(tenant, principal or None, quotas) for every readable quota record of the image."""
    root = image.root or image
    for tenant, view in root.tenants.items():
        for record in view.quotas or ():
            try:
                principal = record.get("principal")
                yield tenant, principal, client_quotas(record.get("limits") or {})
            except (TypeError, ValueError, AttributeError) as e:
                logger.error("skipping unreadable quota of tenant %s: %s", tenant, e)


class QuotaEnforcer:
    """One per broker (event loop). ``usage(tenant)`` returns the tenant's stored bytes here."""

    def __init__(
        self,
        image: Callable[[], ClusterMetadata],
        usage: Callable[[str], int],
        metrics: BrokerMetrics | None = None,
        *,
        manager: QuotaManager | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self._image = image
        self._usage = usage
        self._metrics = metrics
        self._clock = clock
        self._sleep = sleep
        self.manager = manager or QuotaManager(clock=clock)
        self._root: ClusterMetadata | None = None
        self._set: set[tuple[str, str | None]] = set()
        self._next_expiry = clock() + EXPIRE_INTERVAL_S

    # --- configuration from the metadata image -------------------------------------------

    def refresh(self) -> QuotaManager:
        """Re-read the quotas when the metadata image changed; returns the manager."""
        image = self._image()
        root = image.root or image
        if root is not self._root:
            self._root = root
            seen: set[tuple[str, str | None]] = set()
            for tenant, principal, quotas in quota_entries(root):
                self.manager.set_quotas(tenant, quotas, principal)
                seen.add((tenant, principal))
            for tenant, principal in self._set - seen:
                self.manager.remove_quotas(tenant, principal)
            self._set = seen
        now = self._clock()
        if now >= self._next_expiry:
            self._next_expiry = now + EXPIRE_INTERVAL_S
            self.manager.expire(now)
        return self.manager

    # --- rates ---------------------------------------------------------------------------

    def record(self, principal: Principal | None, kind: QuotaKind, nbytes: int) -> int:
        """Record one request carrying ``nbytes`` of ``kind``; the throttle time in ms (the
        larger of the byte-rate and request-rate throttles), 0 without a tenant."""
        tenant = getattr(principal, "tenant", None)
        if principal is None or tenant is None:
            return 0
        manager = self.refresh()
        throttle = manager.record(kind, tenant, principal.name, nbytes)
        kinds = {kind: throttle}
        request = manager.record_request(tenant, principal.name)
        kinds[QuotaKind.REQUEST] = request
        worst = max(kinds.values())
        if worst and self._metrics is not None:
            which = max(kinds, key=kinds.__getitem__)
            self._metrics.record_throttle(tenant, _KIND_LABELS[which], worst / 1000)
        return worst

    def produce(self, principal: Principal | None, nbytes: int) -> int:
        return self.record(principal, QuotaKind.PRODUCE, nbytes)

    def fetch(self, principal: Principal | None, nbytes: int) -> int:
        return self.record(principal, QuotaKind.FETCH, nbytes)

    async def throttle_produce(self, principal: Principal | None, nbytes: int) -> int:
        """Record a produce request and hold its response back; the throttle time (ms)."""
        throttle = self.produce(principal, nbytes)
        await self.delay(throttle)
        return throttle

    async def throttle_fetch(self, principal: Principal | None, nbytes: int) -> int:
        """Record a fetch and hold its response back; the throttle time (ms)."""
        throttle = self.fetch(principal, nbytes)
        await self.delay(throttle)
        return throttle

    async def delay(self, throttle_ms: int) -> None:
        """Hold this response back by the throttle time (this task only)."""
        if throttle_ms > 0:
            await self._sleep(throttle_ms / 1000)

    # --- storage and connections ---------------------------------------------------------

    def check_storage(self, principal: Principal | None) -> None:
        """Raise ``QUOTA_EXCEEDED`` while the tenant stores at least its limit here."""
        tenant = getattr(principal, "tenant", None)
        if tenant is None:
            return
        limit = self.refresh().quotas(tenant).storage_bytes
        if limit is None:
            return
        used = self._usage(tenant)
        error = self.manager.check_storage(tenant, used)
        if error is not None:
            raise DataPlaneQuotaExceededError(
                error.quota,
                used,
                limit,
                f"storage quota exceeded: your organisation stores {used} bytes on this "
                f"broker, at or over its storage limit of {limit} bytes; produce is refused "
                "until retention or topic deletion frees space, or the quota is raised",
            )


class DataPlaneQuotaExceededError(QuotaExceededError):
    """``QUOTA_EXCEEDED`` on the data plane (HTTP 403: retrying does not help until the
    tenant's usage or limit changes)."""

    @property
    def details(self) -> dict[str, object]:
        return {"quota": self.quota, "used": self.used, "limit": self.limit}


_KIND_LABELS = {
    QuotaKind.PRODUCE: "produce",
    QuotaKind.FETCH: "fetch",
    QuotaKind.REQUEST: "request",
}


def tenant_stored_bytes(
    image: Callable[[], ClusterMetadata], partitions: Mapping[tuple[str, int], Any]
) -> Callable[[str], int]:
    """``usage(tenant)``: the bytes the tenant's partition logs hold on this broker
    (``partitions`` is the replica manager's ``{(log_key, partition): Partition}``)."""

    def usage(tenant: str) -> int:
        view = image().for_tenant(tenant)
        total = 0
        for topic in view.topics.values():
            for info in topic.partitions:
                p = partitions.get((info.log_key, info.partition))
                if p is not None:
                    total += p.log.size_in_bytes
        return total

    return usage
