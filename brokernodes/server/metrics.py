"""Prometheus metrics, one ``CollectorRegistry`` per broker (so tests can run several).

Byte and record counters carry the tenant (the organisation id the request authenticated
as, ``current_tenant``; empty for static-file keys) beside the topic name, since two tenants
may each have a topic of the same name. Those four counters are counted on every produce
and fetch, so they are plain integers added to on the event loop (the only thread that
counts them) and turned into counters when scraped (``_TrafficCollector``), instead of a
prometheus ``Counter`` child whose ``inc`` takes a lock per call; what a scrape shows is
the same (``*_total`` and ``*_created`` per tenant and topic)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
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


class _TrafficCollector(Collector):
    """``sluice_{bytes,records}_{in,out}`` from ``BrokerMetrics``' tallies, at scrape time."""

    FAMILIES = (
        ("sluice_bytes_in", "Record batch bytes appended", "_in", 0),
        ("sluice_records_in", "Records appended", "_in", 1),
        ("sluice_bytes_out", "Record batch bytes served by fetch", "_out", 0),
        ("sluice_records_out", "Records served by JSON fetch", "_out", 1),
    )

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._metrics = metrics

    def collect(self):
        for name, doc, table, field in self.FAMILIES:
            family = CounterMetricFamily(name, doc, labels=["tenant", "topic"])
            for key, tally in list(getattr(self._metrics, table).items()):
                family.add_metric(list(key), float(tally[field]), created=tally[2])
            yield family


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
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
        # (tenant, topic) -> [bytes, records, created (epoch seconds)]
        self._in: dict[tuple[str, str], list] = {}
        self._out: dict[tuple[str, str], list] = {}
        r.register(_TrafficCollector(self))

    def track_state(
        self,
        offsets: Callable[[], Iterable[tuple[str, int, int, int]]],
        connections: Callable[[], int],
    ) -> None:
        self.registry.register(_StateCollector(offsets, connections))

    def record_in(self, topic: str, nbytes: int, records: int) -> None:
        key = (current_tenant.get() or "", topic)
        tally = self._in.get(key)
        if tally is None:
            tally = self._in[key] = [0, 0, time.time()]
        tally[0] += nbytes
        tally[1] += records
        if self.usage is not None:
            self.usage.on_in(topic, nbytes, records)

    def record_out(self, topic: str, nbytes: int, records: int = 0) -> None:
        key = (current_tenant.get() or "", topic)
        tally = self._out.get(key)
        if tally is None:
            tally = self._out[key] = [0, 0, time.time()]
        tally[0] += nbytes
        tally[1] += records
        if self.usage is not None:
            self.usage.on_out(topic, nbytes, records)

    def record_throttle(self, tenant: str, quota: str, seconds: float) -> None:
        self.throttle_seconds.labels(tenant, quota).inc(seconds)
        self.throttled.labels(tenant, quota).inc()
        if self.usage is not None:
            self.usage.on_throttle(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
