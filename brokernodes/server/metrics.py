"""Prometheus metrics, one ``CollectorRegistry`` per broker (so tests can run several).

Byte and record counters carry the tenant (the organisation id the request authenticated
as, ``current_tenant``; empty for static-file keys) beside the topic name, since two tenants
may each have a topic of the same name."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokernodes.server.metadata.cluster import current_tenant

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class _StateCollector(Collector):
    """Gauges read at scrape time: log end offsets and active connections."""

    def __init__(
        self,
        offsets: Callable[[], Iterable[tuple[str, int, int, int]]],
        connections: Callable[[], int],
    ) -> None:
        self._offsets = offsets
        self._connections = connections

    def collect(self):
        leo = GaugeMetricFamily(
            "sluice_log_end_offset", "Log end offset", labels=["topic", "partition"]
        )
        hw = GaugeMetricFamily(
            "sluice_high_watermark", "High watermark", labels=["topic", "partition"]
        )
        for topic, partition, end, watermark in self._offsets():
            leo.add_metric([topic, str(partition)], end)
            hw.add_metric([topic, str(partition)], watermark)
        yield leo
        yield hw
        yield GaugeMetricFamily(
            "sluice_active_connections", "Open client connections", value=self._connections()
        )


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        by_topic = ["tenant", "topic"]
        self.bytes_in = Counter(
            "sluice_bytes_in", "Record batch bytes appended", by_topic, registry=r
        )
        self.bytes_out = Counter(
            "sluice_bytes_out", "Record batch bytes served by fetch", by_topic, registry=r
        )
        self.records_in = Counter("sluice_records_in", "Records appended", by_topic, registry=r)
        self.records_out = Counter(
            "sluice_records_out", "Records served by JSON fetch", by_topic, registry=r
        )
        self.request_seconds = Histogram(
            "sluice_request_seconds",
            "Request latency by endpoint",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "sluice_request_errors", "Error answers by code", ["error_code"], registry=r
        )
        self.throttle_seconds = Counter(
            "sluice_throttle_seconds",
            "Time responses were held back by quotas, by tenant id and quota",
            ["tenant", "quota"],
            registry=r,
        )
        self.throttled = Counter(
            "sluice_throttled_requests",
            "Responses held back by quotas, by tenant id and quota",
            ["tenant", "quota"],
            registry=r,
        )
        self.usage = None  # the broker's UsageMeter (brokernodes.server.usage)
        self._in: dict[tuple[str, str], tuple] = {}
        self._out: dict[tuple[str, str], tuple] = {}

    def track_state(
        self,
        offsets: Callable[[], Iterable[tuple[str, int, int, int]]],
        connections: Callable[[], int],
    ) -> None:
        self.registry.register(_StateCollector(offsets, connections))

    def record_in(self, topic: str, nbytes: int, records: int) -> None:
        key = (current_tenant.get() or "", topic)
        c = self._in.get(key)
        if c is None:
            c = self._in[key] = (self.bytes_in.labels(*key), self.records_in.labels(*key))
        c[0].inc(nbytes)
        c[1].inc(records)
        if self.usage is not None:
            self.usage.on_in(topic, nbytes, records)

    def record_out(self, topic: str, nbytes: int, records: int = 0) -> None:
        key = (current_tenant.get() or "", topic)
        c = self._out.get(key)
        if c is None:
            c = self._out[key] = (self.bytes_out.labels(*key), self.records_out.labels(*key))
        c[0].inc(nbytes)
        if records:
            c[1].inc(records)
        if self.usage is not None:
            self.usage.on_out(topic, nbytes, records)

    def record_throttle(self, tenant: str, quota: str, seconds: float) -> None:
        self.throttle_seconds.labels(tenant, quota).inc(seconds)
        self.throttled.labels(tenant, quota).inc()
        if self.usage is not None:
            self.usage.on_throttle(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
