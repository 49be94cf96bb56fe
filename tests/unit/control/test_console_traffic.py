"""The overview's live bytes: the brokers' own metrics registry rendered with two tenants'
traffic, read back for one tenant only; the API's answer when a broker cannot be read. The
whole path against real brokers (produce, a non-zero rate, nothing from another
organisation) runs in tests/e2e/test_console_e2e.py."""

from __future__ import annotations

from django.utils import timezone

from backend.cluster.models import Broker
from backend.console.traffic import tenant_byte_counters
from backend.tenancy import roles
from brokernodes.server.metadata import current_tenant
from brokernodes.server.metrics import BrokerMetrics
from tests.integration.conftest import free_port

from .conftest import session_client

ALPHA, BRAVO = "7f1d7a3e-0000-4000-8000-00000000000a", "7f1d7a3e-0000-4000-8000-00000000000b"


def _render(traffic: list[tuple[str | None, str, int, int]]) -> str:
    """A broker's /metrics text after (tenant, topic, bytes in, bytes out) traffic."""
    metrics = BrokerMetrics()
    for tenant, topic, nin, nout in traffic:
        token = current_tenant.set(tenant)
        try:
            if nin:
                metrics.record_in(topic, nin, 1)
            if nout:
                metrics.record_out(topic, nout, 1)
        finally:
            current_tenant.reset(token)
    return metrics.render().decode()


def test_only_the_callers_tenant_series_are_kept():
    text = _render(
        [
            (ALPHA, "orders", 1000, 0),
            (ALPHA, "orders", 500, 300),
            (ALPHA, "audit", 0, 70),
            (BRAVO, "orders", 99_000, 88_000),  # the same topic name in another tenant
            (None, "orders", 5_000, 5_000),  # static-file keys: no tenant
        ]
    )
    assert tenant_byte_counters(text, ALPHA) == {
        "orders": {"bytes_in": 1500, "bytes_out": 300},
        "audit": {"bytes_in": 0, "bytes_out": 70},
    }
    bravo = {"orders": {"bytes_in": 99_000, "bytes_out": 88_000}}
    assert tenant_byte_counters(text, BRAVO) == bravo
    assert tenant_byte_counters(text, "") == {"orders": {"bytes_in": 5_000, "bytes_out": 5_000}}
    assert tenant_byte_counters(text, "no-such-tenant") == {}


def test_traffic_api_names_a_broker_it_cannot_read(world):
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    r = client.get("/api/v1/console/traffic")
    assert r.status_code == 200, r.content
    assert r.json()["counters"] == [] and r.json()["brokers"] == [] and r.json()["errors"] == []
    Broker.objects.create(
        broker_id=4, url=f"http://127.0.0.1:{free_port()}", last_heartbeat_at=timezone.now()
    )
    doc = client.get("/api/v1/console/traffic").json()
    assert doc["brokers"] == [] and doc["counters"] == []
    assert len(doc["errors"]) == 1 and doc["errors"][0].startswith("broker 4: cannot reach")
