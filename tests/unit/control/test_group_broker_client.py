"""The control plane's group calls (``backend.groups.broker_client``) against a real broker
process and silent ones on loopback: listing asks every live broker at once (silent ones cost
one timeout together, not one each) and names those that did not answer; a request walks past
silent brokers to one that answers; none answering is 503 BROKERS_UNAVAILABLE."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from django.utils import timezone

from backend.cluster.models import Broker
from backend.core.exceptions import NotFound
from backend.groups import broker_client
from tests.integration.conftest import BrokerLauncher

SECRET = "groups-client-test-secret"
TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def real_broker(tmp_path_factory):
    launcher = BrokerLauncher(tmp_path_factory.mktemp("group-client"))
    try:
        yield launcher(
            {"orders": (1, {}), "__consumer_offsets": (1, {})},
            env={"SLUICE_CLUSTER_SECRET": SECRET},
        )
    finally:
        launcher.close()


@pytest.fixture
def silent_urls():
    """Three loopback ports that accept connections and never answer."""
    socks = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        socks.append(s)
    yield [f"http://127.0.0.1:{s.getsockname()[1]}" for s in socks]
    for s in socks:
        s.close()


@pytest.fixture
def live(db, settings, monkeypatch):
    """``live(urls)``: register brokers 1..n at ``urls`` with fresh heartbeats."""
    settings.SLUICE_CLUSTER_SECRET = SECRET
    monkeypatch.setattr(broker_client, "TIMEOUT_S", TIMEOUT_S)

    def register(urls: list[str]) -> None:
        for i, url in enumerate(urls, start=1):
            Broker.objects.create(broker_id=i, url=url, last_heartbeat_at=timezone.now())

    return register


def test_listing_asks_every_broker_at_once(live, real_broker, silent_urls):
    live([*silent_urls, real_broker.url])
    started = time.monotonic()
    groups, missing = broker_client.list_groups(uuid.uuid4())
    took = time.monotonic() - started
    assert groups == [] and missing == silent_urls
    # one after another, the three silent brokers alone would take 3 x TIMEOUT_S
    assert took < 2.5 * TIMEOUT_S, f"listing took {took:.2f} s"


def test_a_request_walks_past_silent_brokers(live, real_broker, silent_urls):
    live([silent_urls[0], real_broker.url])
    with pytest.raises(NotFound):
        broker_client.group_request(uuid.uuid4(), "no-such-group", "GET")


def test_no_broker_answering_is_brokers_unavailable(live, silent_urls):
    live(silent_urls[:2])
    for call in (
        lambda: broker_client.list_groups(uuid.uuid4()),
        lambda: broker_client.group_request(uuid.uuid4(), "g", "GET"),
    ):
        with pytest.raises(broker_client.BrokersUnavailable) as e:
            call()
        assert e.value.status_code == 503 and e.value.error_code == "BROKERS_UNAVAILABLE"
