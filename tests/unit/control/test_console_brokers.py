"""The console's broker calls (``backend.console.brokers``) against a real broker process on
loopback: produce, list offsets, fetch, metadata and /metrics answer as before, and every
failure is the console's ``BrokerError`` with the broker's code (401 shown as 502: it is the
console's key at fault, not the person), an unreachable broker as BROKER_UNAVAILABLE."""

from __future__ import annotations

import time

import pytest

from backend.console import brokers
from tests.integration.conftest import API_KEY, CLUSTER_ID, BrokerLauncher, free_port

SECRET = "console-brokers-test-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    launcher = BrokerLauncher(tmp_path_factory.mktemp("console-brokers"))
    try:
        yield launcher({"shown": (1, {})}, env={"SLUICE_CLUSTER_SECRET": SECRET})
    finally:
        launcher.close()


@pytest.fixture
def cluster(settings):
    settings.SLUICE_CLUSTER_ID = CLUSTER_ID
    settings.SLUICE_CLUSTER_SECRET = SECRET


def test_produce_offsets_fetch_metadata_and_metrics(broker, cluster):
    first = brokers.list_offset(broker.url, API_KEY, "shown", 0, "latest")
    record = {"partition_id": 0, "key": {"type": "STRING", "data": "k"}}
    record["value"] = {"type": "STRING", "data": "shown to a person"}
    answer = brokers.produce(broker.url, API_KEY, "shown", record)
    assert answer["offset"] == first
    assert brokers.list_offset(broker.url, API_KEY, "shown", 0, "latest") == first + 1
    page = brokers.fetch_records(broker.url, API_KEY, "shown", 0, first, 10)
    assert [r["offset"] for r in page["records"]] == [first]
    assert "shown" in {t["name"] for t in brokers.metadata(broker.url, API_KEY)["topics"]}
    assert "sluice_bytes_in" in brokers.metrics_text(broker.url)


def test_the_brokers_refusals_keep_their_codes(broker, cluster, settings):
    with pytest.raises(brokers.BrokerError) as e:
        brokers.list_offset(broker.url, API_KEY, "not-here", 0, "latest")
    assert (e.value.error_code, e.value.status_code) == ("UNKNOWN_TOPIC_OR_PARTITION", 404)
    settings.SLUICE_CLUSTER_SECRET = "not-the-brokers"
    with pytest.raises(brokers.BrokerError) as e:
        brokers.metrics_text(broker.url)
    assert (e.value.error_code, e.value.status_code) == ("UNAUTHENTICATED", 502)


def test_an_unknown_key_is_asked_again_for_the_new_key_grace_then_refused(broker, cluster):
    started = time.monotonic()
    with pytest.raises(brokers.BrokerError) as e:
        brokers.metadata(broker.url, "sk_test.not-published-yet")
    took = time.monotonic() - started
    assert (e.value.error_code, e.value.status_code) == ("UNAUTHENTICATED", 502)
    assert brokers.NEW_KEY_GRACE_S - 0.3 <= took < brokers.NEW_KEY_GRACE_S + 3


def test_an_unreachable_broker_is_broker_unavailable(cluster):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(brokers.BrokerError, match=f"cannot reach the broker at {url}") as e:
        brokers.metadata(url, API_KEY)
    assert (e.value.error_code, e.value.status_code) == ("BROKER_UNAVAILABLE", 502)
