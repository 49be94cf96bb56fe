"""Brokers register their Kafka listener: the control plane stores the advertised
``host:port`` and publishes it as ``"kafka"`` in the broker's metadata record (the broker's
image reads it into ``BrokerInfo.kafka``); a broker without one publishes none."""

from __future__ import annotations

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from backend.cluster import services
from backend.cluster.models import Broker, MetadataRecord
from brokernodes.server.metadata.image import apply_records, build_image


def broker_client() -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    return c


def latest_broker(broker_id: int) -> dict:
    r = MetadataRecord.objects.filter(kind="broker", key=str(broker_id)).order_by("-version")
    return r.first().value


@pytest.mark.django_db
def test_registration_stores_and_publishes_the_kafka_listener():
    c = broker_client()
    r = c.post(
        "/internal/v1/brokers/register",
        {"broker_id": 1, "url": "http://127.0.0.1:9092", "kafka": "127.0.0.1:29092"},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert Broker.objects.get(broker_id=1).kafka == "127.0.0.1:29092"
    assert latest_broker(1)["kafka"] == "127.0.0.1:29092"
    image = c.get("/internal/v1/metadata").json()
    state = apply_records({}, image["records"], reset=True)
    built = build_image(state, cluster_id="c", broker_id=1, version=image["version"])
    assert built.brokers[1].kafka == "127.0.0.1:29092"

    # re-registering without a listener (restarted without --kafka-port) withdraws it
    r = c.post(
        "/internal/v1/brokers/register",
        {"broker_id": 1, "url": "http://127.0.0.1:9092"},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert "kafka" not in latest_broker(1)
    assert Broker.objects.get(broker_id=1).kafka == ""


@pytest.mark.django_db
def test_broker_record_names_an_ipv6_listener():
    broker = services.broker_register(broker_id=2, url="http://127.0.0.1:9093", kafka="[::1]:29093")
    assert services.broker_record(broker)["kafka"] == "[::1]:29093"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad", ["127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":9092", "http://h:1", "h :1", 5]
)
def test_a_bad_listener_address_is_refused(bad):
    r = broker_client().post(
        "/internal/v1/brokers/register",
        {"broker_id": 3, "url": "http://127.0.0.1:9094", "kafka": bad},
        format="json",
    )
    assert r.status_code == 400, r.content
    assert "kafka" in r.json()["fields"]
    assert not Broker.objects.filter(broker_id=3).exists()
