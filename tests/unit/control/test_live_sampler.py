"""The control plane's sampler of the live series (backend/analytics/live_sampler.py): the
brokers' own metrics registries (``BrokerMetrics``, ``GroupLagCollector``) render the text it
reads; counter growth is spread over the minutes between readings, resets count from 0, lag
gauges sum per group and topic, other tenants and unknown ones stay out, and a series the
live Spark job keeps current is left to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest

from backend.analytics import live_sampler
from backend.analytics.live_services import ControlPlaneSink
from backend.analytics.models import LiveLagMinute, LiveStream, LiveThroughputMinute
from backend.tenancy import roles
from brokernodes.server.coordinator.lag_metrics import GroupLagCollector
from brokernodes.server.metadata.cluster import current_tenant
from brokernodes.server.metrics import BrokerMetrics

from .conftest import key_client

_NOW = datetime.now(UTC).replace(second=0, microsecond=0)
T0 = (_NOW - timedelta(hours=1)).replace(minute=0, second=30)  # hh:00:30, an hour or two ago


class Broker:
    """One broker's metrics registry, as its /metrics renders it."""

    def __init__(self) -> None:
        self.metrics = BrokerMetrics()
        self.lag = GroupLagCollector()
        self.metrics.registry.register(self.lag)

    def produce(self, tenant, topic: str, records: int, size: int) -> None:
        token = current_tenant.set(str(tenant))
        try:
            self.metrics.record_in(topic, size, records)
        finally:
            current_tenant.reset(token)

    def text(self) -> str:
        return generate_latest(self.metrics.registry).decode()


def test_spread_splits_growth_by_minute_overlap_and_keeps_the_total():
    t0 = T0.timestamp()  # hh:00:30
    assert live_sampler.spread(120, t0, t0 + 60) == {t0 - 30: 60, t0 + 30: 60}
    parts = live_sampler.spread(1001, t0, t0 + 150)  # 30 s + 60 s + 60 s
    assert sum(parts.values()) == 1001 and sorted(parts.values()) == [200, 400, 401]
    assert live_sampler.spread(0, t0, t0 + 60) == {}
    assert live_sampler.spread(5, t0, t0) == {}


def test_growth_counts_a_reset_from_zero_and_a_new_series_whole():
    assert live_sampler.growth([10, 100, 0, 0], [4, 40, 0, 0]) == [6, 60, 0, 0]
    assert live_sampler.growth([3, 30, 0, 0], [10, 100, 0, 0]) == [3, 30, 0, 0]
    assert live_sampler.growth([7, 70, 1, 1], None) == [7, 70, 1, 1]


def test_parse_keeps_tenant_series_and_lag_per_partition(world):
    b = Broker()
    b.produce(world.a.org.id, "orders", 3, 300)
    b.produce("", "static", 9, 0)  # no tenant: not the control plane's
    b.lag.rows = [(f"{world.a.org.id}/billing", "orders", 0, 7, None), ("bare", "t", 0, 1, None)]
    counters, lag = live_sampler.parse_metrics(b.text())
    assert counters == {f"{world.a.org.id}/orders": [3, 300, 0, 0]}
    assert lag == [(str(world.a.org.id), "billing", "orders", 0, 7)]


def test_throughput_history_from_two_readings_spread_over_minutes(world):
    b1, b2 = Broker(), Broker()
    a, other = world.a.org.id, world.b.org.id
    b1.produce(a, "orders", 10, 1000)
    b2.produce(other, "theirs", 1, 10)
    first = live_sampler.sample_texts({1: b1.text(), 2: b2.text()}, now=T0)
    assert first["throughput"] == 0  # one reading: nothing to attribute yet
    assert LiveThroughputMinute.objects.count() == 0
    b1.produce(a, "orders", 120, 12_000)  # over the next 60 s: half in each minute
    b2.produce(other, "theirs", 4, 40)
    b1.produce("not-a-tenant-id", "x", 5, 5)
    live_sampler.sample_texts({1: b1.text(), 2: b2.text()}, now=T0 + timedelta(seconds=60))
    rows = list(LiveThroughputMinute.objects.filter(organisation=world.a.org).order_by("minute"))
    assert [(r.minute.minute, r.records_in, r.bytes_in) for r in rows] == [
        (0, 60, 6000),
        (1, 60, 6000),
    ]
    theirs = LiveThroughputMinute.objects.filter(organisation=world.b.org)
    assert sum(r.records_in for r in theirs) == 4
    s = LiveStream.objects.get(name="throughput")
    assert (s.source, s.measured_from, s.as_of) == ("sampler", T0, T0 + timedelta(seconds=60))
    # a third reading adds onto the minute it shares with the second; a restarted broker's
    # counters (lower than before) count from 0
    b1 = Broker()
    b1.produce(a, "orders", 30, 3000)
    live_sampler.sample_texts({1: b1.text(), 2: b2.text()}, now=T0 + timedelta(seconds=120))
    rows = list(LiveThroughputMinute.objects.filter(organisation=world.a.org).order_by("minute"))
    assert [(r.minute.minute, r.records_in) for r in rows] == [(0, 60), (1, 75), (2, 15)]
    assert LiveStream.objects.get(name="throughput").measured_from == T0
    # served by the reports API, to its own tenant only
    resp = key_client(world.a.token(roles.READ_ONLY)).get("/api/v1/reports/live/throughput/")
    assert resp.status_code == 200
    body = resp.json()
    assert {r["topic"] for r in body["rows"]} == {"orders"}
    assert body["totals"] == [
        {"topic": "orders", "records_in": 150, "bytes_in": 15000, "records_out": 0, "bytes_out": 0}
    ]


def test_a_long_gap_is_not_attributed(world):
    b = Broker()
    b.produce(world.a.org.id, "orders", 1, 1)
    live_sampler.sample_texts({1: b.text()}, now=T0)
    b.produce(world.a.org.id, "orders", 1000, 1000)
    later = T0 + timedelta(seconds=live_sampler.MAX_SPREAD_S + 1)
    assert live_sampler.sample_texts({1: b.text()}, now=later)["throughput"] == 0
    assert LiveThroughputMinute.objects.count() == 0


def test_lag_summed_per_group_and_topic_with_unmeasured_partitions(world):
    b = Broker()
    a = world.a.org.id
    b.lag.rows = [
        (f"{a}/billing", "orders", 0, 5, None),
        (f"{a}/billing", "orders", 1, 7, None),
        (f"{a}/billing", "refunds", 0, None, None),  # not measured: no gauge
        (f"{world.b.org.id}/theirs", "t", 0, 99, None),
    ]
    now = T0 + timedelta(seconds=5)
    out = live_sampler.sample_texts({1: b.text()}, now=now)
    assert out["lag"] == 2  # the refunds partition has no gauge, so no row
    row = LiveLagMinute.objects.get(organisation=world.a.org, group_id="billing")
    assert (row.offset_lag, row.partitions, row.measured) == (12, 2, 2)
    assert row.minute == T0.replace(second=0) and row.sampled_at == now
    resp = key_client(world.a.token(roles.READ_ONLY)).get("/api/v1/reports/live/lag/?group=billing")
    body = resp.json()
    assert [(r["topic"], r["offset_lag"]) for r in body["current"]] == [("orders", 12)]
    assert LiveStream.objects.get(name="lag").source == "sampler"


def test_a_series_the_live_job_keeps_current_is_left_to_it(world):
    a = str(world.a.org.id)
    now_ms = int(T0.timestamp() * 1000)
    ControlPlaneSink().lag(
        [],
        [
            {
                "tenant": a,
                "group": "billing",
                "topic": "orders",
                "minute_ms": now_ms - now_ms % 60_000,
                "sampled_ms": now_ms,
                "offset_lag": 3,
                "partitions": 1,
                "measured": 1,
                "topic_partitions": 1,
            }
        ],
        sampled_ms=now_ms,
    )
    assert LiveStream.objects.get(name="lag").source == "spark"
    b = Broker()
    b.lag.rows = [(f"{a}/billing", "orders", 0, 500, None)]
    b.produce(a, "orders", 1, 1)
    out = live_sampler.sample_texts({1: b.text()}, now=T0 + timedelta(seconds=20))
    assert out["lag"] == "live job"
    assert LiveLagMinute.objects.get(group_id="billing").offset_lag == 3
    # stale for longer than STALE_S: the sampler takes over
    later = T0 + timedelta(seconds=live_sampler.STALE_S + 30)
    assert live_sampler.sample_texts({1: b.text()}, now=later)["lag"] == 1
    assert LiveStream.objects.get(name="lag").source == "sampler"
