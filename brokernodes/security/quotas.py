"""Client quotas as Kafka computes them (KIP-13, ``ClientQuotaManager``), as pure math.

Rates are sampled the way Kafka's metrics ``Rate`` is: a window of ``num_samples`` samples of
``sample_seconds`` each. A request's bytes (or 1, for the request rate) are recorded first;
if the observed rate is then above the quota the answer is a throttle time

    throttle_ms = (observed - quota) / quota * window_ms      (bounded by max_throttle_ms)

which is how long the client must stay silent for the rate over the window to fall back to
the quota. Nothing here sleeps: the broker delays its response by the throttle time and
reports ``throttle_time_ms``, as Kafka does. The clock is injected.

Quotas apply per tenant (all its principals together) and per principal; both are recorded
and the stricter wins (the larger throttle). Storage and count quotas are plain checks.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from brokernodes.errors import SluiceError

__all__ = [
    "ClientQuotas",
    "QuotaConfig",
    "QuotaExceededError",
    "QuotaKind",
    "QuotaManager",
    "Rate",
    "check_count",
    "check_storage",
    "throttle_time_ms",
    "validate_quotas",
]


class QuotaKind(enum.Enum):
    """The rate quotas, valued by their Kafka-style config names."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_rate"
    """Requests per second (Kafka's ``request_percentage`` measures handler time instead)."""


class QuotaExceededError(SluiceError):
    """A storage or count quota the request would break; returned by the checks, raised by
    the caller. ``quota`` names the limit (``storage_bytes``, ``topics``...)."""

    error_code = "QUOTA_EXCEEDED"

    def __init__(self, quota: str, used: int, limit: int, message: str) -> None:
        super().__init__(message)
        self.quota = quota
        self.used = used
        self.limit = limit


_RATE_FIELDS = frozenset(k.value for k in QuotaKind)
_COUNT_FIELDS = frozenset(
    {"storage_bytes", "topics", "partitions", "connections", "consumer_instances", "streams"}
)


def validate_quotas(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """Field errors for quota values (rates > 0, limits >= 0, or null), ``{}`` when valid."""
    errors: dict[str, list[str]] = {}
    for name, value in doc.items():
        if name not in _RATE_FIELDS | _COUNT_FIELDS:
            errors.setdefault(name, []).append("is not a quota.")
        elif value is None:
            continue
        elif isinstance(value, bool) or not isinstance(value, int | float):
            errors.setdefault(name, []).append("must be a number or null (unlimited).")
        elif name in _RATE_FIELDS and not (value > 0 and math.isfinite(value)):
            errors.setdefault(name, []).append("a rate must be a positive number per second.")
        elif name in _COUNT_FIELDS and (not isinstance(value, int) or value < 0):
            errors.setdefault(name, []).append("a limit must be a whole number >= 0.")
    return errors


@dataclass(frozen=True, kw_only=True)
class ClientQuotas:
    """The quotas of one entity (a tenant or a principal); ``None`` means unlimited.

    Rates are per second; ``storage_bytes``, ``topics``, ``partitions`` are tenant-wide
    limits; ``connections`` counts open connections (and WebSockets); ``consumer_instances``
    and ``streams`` count REST consumer instances and WebSocket streams held on one broker
    (unset: the broker's per-tenant default, ``brokernodes.server.tenant_caps``).
    """

    producer_byte_rate: float | None = None
    consumer_byte_rate: float | None = None
    request_rate: float | None = None
    storage_bytes: int | None = None
    topics: int | None = None
    partitions: int | None = None
    connections: int | None = None
    consumer_instances: int | None = None
    streams: int | None = None

    def __post_init__(self) -> None:
        errors = validate_quotas(self.to_dict())
        if errors:
            detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
            raise ValueError(f"invalid quotas: {detail}")

    def rate(self, kind: QuotaKind) -> float | None:
        return getattr(self, kind.value)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ClientQuotas:
        """From the JSON form (metadata log); unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})

    def to_dict(self) -> dict[str, float | int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


UNLIMITED = ClientQuotas()


@dataclass(frozen=True)
class QuotaConfig:
    """Kafka's ``quota.window.num`` (11) and ``quota.window.size.seconds`` (1) by default.

    ``max_throttle_ms`` bounds one throttle (default: the whole window). Sensors idle for
    ``inactive_sensor_expiration_seconds`` are dropped by :meth:`QuotaManager.expire`.
    """

    num_samples: int = 11
    sample_seconds: float = 1.0
    max_throttle_ms: int | None = None
    inactive_sensor_expiration_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if self.num_samples < 2:
            raise ValueError("num_samples must be >= 2 (one sample is always filling)")
        if self.sample_seconds <= 0:
            raise ValueError("sample_seconds must be > 0")

    @property
    def max_throttle(self) -> int:
        if self.max_throttle_ms is not None:
            return self.max_throttle_ms
        return math.ceil(self.num_samples * self.sample_seconds * 1000)


class Rate:
    """Kafka's sampled ``Rate``: the sum over live samples divided by the window's length.

    A sample covers ``sample_seconds`` from its start; recording past its end starts the next
    (reusing the oldest). Samples older than the whole window are purged. The window length is
    the time since the oldest sample began, but never less than ``num_samples - 1`` full
    samples, so a fresh sensor does not read one burst as a huge rate.
    """

    __slots__ = ("_config", "_current", "_starts", "_values", "last_record")

    def __init__(self, config: QuotaConfig) -> None:
        self._config = config
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = 0
        self.last_record = -math.inf

    def record(self, value: float, now: float) -> None:
        if not self._starts:
            self._starts.append(now)
            self._values.append(0.0)
        elif now - self._starts[self._current] >= self._config.sample_seconds:
            self._current = (self._current + 1) % self._config.num_samples
            if self._current >= len(self._starts):
                self._starts.append(now)
                self._values.append(0.0)
            else:
                self._starts[self._current] = now
                self._values[self._current] = 0.0
        self._values[self._current] += value
        self.last_record = now

    def _purge(self, now: float) -> None:
        expire_age = self._config.num_samples * self._config.sample_seconds
        for i, start in enumerate(self._starts):
            if now - start >= expire_age:
                self._starts[i] = now
                self._values[i] = 0.0

    def window_seconds(self, now: float) -> float:
        """The length the rate is averaged over (Kafka's ``Rate.windowSize``)."""
        self._purge(now)
        oldest = min(self._starts, default=now)
        elapsed = now - oldest
        sample = self._config.sample_seconds
        full = math.floor(elapsed / sample)
        min_full = self._config.num_samples - 1
        if full < min_full:
            elapsed += (min_full - full) * sample
        return elapsed

    def measure(self, now: float) -> float:
        """The observed rate per second at ``now``."""
        window = self.window_seconds(now)
        return sum(self._values) / window


def throttle_time_ms(observed: float, quota: float, window_seconds: float, max_ms: int) -> int:
    """Kafka's ``QuotaUtils.boundedThrottleTime``: 0 within quota, else the silence (ms) that
    brings the rate over the window back down to ``quota``, capped at ``max_ms``."""
    if observed <= quota:
        return 0
    return min(math.ceil((observed - quota) / quota * window_seconds * 1000), max_ms)


def check_storage(used: int, limit: int | None) -> QuotaExceededError | None:
    """Refuse produce while the tenant is at or over its storage quota (a soft limit: the
    write that crosses it succeeds, later ones fail until retention frees space)."""
    if limit is None or used < limit:
        return None
    return QuotaExceededError(
        "storage_bytes",
        used,
        limit,
        f"the organisation stores {used} bytes, at or over its storage quota of {limit} "
        "bytes; delete topics or lower retention, or ask for a larger quota.",
    )


def check_count(
    quota: str, current: int, adding: int, limit: int | None
) -> QuotaExceededError | None:
    """Refuse creating ``adding`` more of ``quota`` (topics, partitions, connections) when
    that would go over ``limit`` (a hard limit)."""
    if limit is None or current + adding <= limit:
        return None
    return QuotaExceededError(
        quota,
        current,
        limit,
        f"adding {adding} {quota} to {current} would exceed the quota of {limit} {quota}.",
    )


class QuotaManager:
    """Rate sensors and throttle times per (tenant, principal), Kafka's ``ClientQuotaManager``.

    Every record goes to the principal's sensor and to the tenant's aggregate sensor; the
    answer is the larger throttle of the two levels that have a quota (the stricter wins).
    Values are recorded even when throttled, as Kafka does. Not thread-safe: one per event
    loop.
    """

    def __init__(
        self,
        config: QuotaConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or QuotaConfig()
        self._clock = clock
        self._tenant_quotas: dict[str, ClientQuotas] = {}
        self._principal_quotas: dict[tuple[str, str], ClientQuotas] = {}
        # (kind, tenant, principal or None for the tenant aggregate) -> Rate
        self._sensors: dict[tuple[QuotaKind, str, str | None], Rate] = {}

    # -- configuration ------------------------------------------------------------------------

    def set_quotas(self, tenant: str, quotas: ClientQuotas, principal: str | None = None) -> None:
        """Set the tenant's quotas, or one principal's within it (replacing earlier ones)."""
        if principal is None:
            self._tenant_quotas[tenant] = quotas
        else:
            self._principal_quotas[(tenant, principal)] = quotas

    def remove_quotas(self, tenant: str, principal: str | None = None) -> None:
        if principal is None:
            self._tenant_quotas.pop(tenant, None)
        else:
            self._principal_quotas.pop((tenant, principal), None)

    def quotas(self, tenant: str, principal: str | None = None) -> ClientQuotas:
        if principal is None:
            return self._tenant_quotas.get(tenant, UNLIMITED)
        return self._principal_quotas.get((tenant, principal), UNLIMITED)

    def effective_rate_quota(self, kind: QuotaKind, tenant: str, principal: str) -> float | None:
        """The stricter of the tenant's and the principal's quota for ``kind``."""
        limits = [
            q
            for q in (self.quotas(tenant).rate(kind), self.quotas(tenant, principal).rate(kind))
            if q is not None
        ]
        return min(limits, default=None)

    # -- rates --------------------------------------------------------------------------------

    def _sensor(self, kind: QuotaKind, tenant: str, principal: str | None) -> Rate:
        key = (kind, tenant, principal)
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = self._sensors[key] = Rate(self.config)
        return sensor

    def record(
        self,
        kind: QuotaKind,
        tenant: str,
        principal: str,
        value: float,
        now: float | None = None,
    ) -> int:
        """Record ``value`` (bytes, or 1 request) and return the throttle time in ms."""
        now = self._clock() if now is None else now
        throttle = 0
        for who, quotas in (
            (principal, self.quotas(tenant, principal)),
            (None, self.quotas(tenant)),
        ):
            sensor = self._sensor(kind, tenant, who)
            sensor.record(value, now)
            quota = quotas.rate(kind)
            if quota is not None:
                observed = sensor.measure(now)
                window = sensor.window_seconds(now)
                throttle = max(
                    throttle, throttle_time_ms(observed, quota, window, self.config.max_throttle)
                )
        return throttle

    def record_produce(
        self, tenant: str, principal: str, nbytes: int, now: float | None = None
    ) -> int:
        return self.record(QuotaKind.PRODUCE, tenant, principal, nbytes, now)

    def record_fetch(
        self, tenant: str, principal: str, nbytes: int, now: float | None = None
    ) -> int:
        return self.record(QuotaKind.FETCH, tenant, principal, nbytes, now)

    def record_request(self, tenant: str, principal: str, now: float | None = None) -> int:
        return self.record(QuotaKind.REQUEST, tenant, principal, 1, now)

    def rate(
        self, kind: QuotaKind, tenant: str, principal: str | None = None, now: float | None = None
    ) -> float:
        """The observed rate of a principal, or of the whole tenant with ``principal=None``."""
        now = self._clock() if now is None else now
        sensor = self._sensors.get((kind, tenant, principal))
        return 0.0 if sensor is None else sensor.measure(now)

    def max_value_in_window(self, kind: QuotaKind, tenant: str, principal: str) -> float | None:
        """The most one request may carry (quota x window), Kafka's bound on a fetch's size so
        a single response cannot blow through the quota; ``None`` when unlimited."""
        quota = self.effective_rate_quota(kind, tenant, principal)
        if quota is None:
            return None
        return quota * self.config.num_samples * self.config.sample_seconds

    def expire(self, now: float | None = None) -> int:
        """Drop sensors idle longer than the expiration; returns how many were dropped."""
        now = self._clock() if now is None else now
        cutoff = now - self.config.inactive_sensor_expiration_seconds
        idle = [k for k, s in self._sensors.items() if s.last_record < cutoff]
        for key in idle:
            del self._sensors[key]
        return len(idle)

    # -- storage and counts -------------------------------------------------------------------

    def check_storage(self, tenant: str, used: int) -> QuotaExceededError | None:
        return check_storage(used, self.quotas(tenant).storage_bytes)

    def check_count(
        self, tenant: str, quota: str, current: int, adding: int = 1, principal: str | None = None
    ) -> QuotaExceededError | None:
        """Check a count quota (``topics``, ``partitions``, ``connections``) of the tenant, and
        of ``principal`` when given (connections)."""
        if quota not in _COUNT_FIELDS - {"storage_bytes"}:
            raise ValueError(f"{quota!r} is not a count quota")
        limit = getattr(self.quotas(tenant, principal), quota)
        return check_count(quota, current, adding, limit)
