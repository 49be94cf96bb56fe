"""The overview's live bytes: the brokers' own metrics registry rendered with two tenants'
traffic, read back for one tenant only; the API's answer when a broker cannot be read, and
when some stall (real HTTP servers on loopback: the others' counters still arrive, within
one short deadline for all). The whole path against real brokers (produce, a non-zero rate,
nothing from another organisation) runs in tests/e2e/test_console_e2e.py."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings
from django.utils import timezone

from backend.cluster.models import Broker
from backend.console import traffic
from backend.console.traffic import tenant_byte_counters
from backend.tenancy import roles
from brokernodes.server.metadata.cluster import current_tenant
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


class _MetricsServer:
    """A loopback HTTP server answering GET /metrics like a broker (cluster secret required),
    or, when ``stall``, holding every request until the test ends."""

    def __init__(self, text: str, *, stall: bool, release: threading.Event):
        owner = self
        expected = f"Cluster {settings.SLUICE_CLUSTER_SECRET}"  # the secret the broker holds

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                owner.requests += 1
                if stall:
                    release.wait(10)
                ok = self.path == "/metrics" and self.headers.get("Authorization") == expected
                body = text.encode() if ok else b'{"error_code": "UNAUTHENTICATED"}'
                try:
                    self.send_response(200 if ok else 401)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the reader gave up on a stalled answer

            def log_message(self, *args):
                """Quiet: the test's output is its assertions."""

        self.requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


@pytest.fixture
def metrics_brokers():
    """Start loopback metrics servers: ``start(text, stall=...) -> url``; all stopped after."""
    release = threading.Event()
    servers: list[_MetricsServer] = []

    def start(text: str, *, stall: bool = False) -> _MetricsServer:
        servers.append(_MetricsServer(text, stall=stall, release=release))
        return servers[-1]

    yield start
    release.set()
    for s in servers:
        s.server.shutdown()
        s.server.server_close()


def test_stalled_brokers_do_not_hold_up_the_others(world, monkeypatch, metrics_brokers):
    monkeypatch.setattr(traffic, "METRICS_TIMEOUT_S", 1.0)
    org = str(world.a.org.id)
    fast = {
        1: metrics_brokers(_render([(org, "orders", 1200, 40), (BRAVO, "orders", 9, 9)])),
        4: metrics_brokers(_render([(org, "orders", 300, 0), (org, "audit", 0, 75)])),
    }
    stalled = {b: metrics_brokers("", stall=True) for b in (2, 3, 5)}
    for broker_id, srv in {**fast, **stalled}.items():
        Broker.objects.create(broker_id=broker_id, url=srv.url, last_heartbeat_at=timezone.now())
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)

    started = time.monotonic()
    r = client.get("/api/v1/console/traffic")
    took = time.monotonic() - started

    assert r.status_code == 200, r.content
    doc = r.json()
    # read one after another, the three stalled brokers alone would take 3 x 1 s
    assert took < 2.5, f"the traffic answer took {took:.2f} s"
    assert all(s.requests == 1 for s in stalled.values())
    assert doc["brokers"] == [1, 4]
    assert doc["counters"] == [
        {"broker_id": 1, "topic": "orders", "bytes_in": 1200, "bytes_out": 40},
        {"broker_id": 4, "topic": "audit", "bytes_in": 0, "bytes_out": 75},
        {"broker_id": 4, "topic": "orders", "bytes_in": 300, "bytes_out": 0},
    ]
    assert [e.split(":")[0] for e in doc["errors"]] == ["broker 2", "broker 3", "broker 5"]
    for e in doc["errors"]:
        assert "no answer within 1 s" in e or "timed out" in e, e


def test_a_broker_refusing_the_cluster_secret_is_named(world, monkeypatch, metrics_brokers):
    srv = metrics_brokers(_render([(str(world.a.org.id), "orders", 1, 1)]))
    Broker.objects.create(broker_id=7, url=srv.url, last_heartbeat_at=timezone.now())
    monkeypatch.setattr(settings, "SLUICE_CLUSTER_SECRET", "not-the-secret-the-broker-wants")
    doc = traffic.byte_counters(organisation=world.a.org)
    assert doc["brokers"] == [] and doc["counters"] == []
    assert doc["errors"] == ["broker 7: the broker answered 401"]
