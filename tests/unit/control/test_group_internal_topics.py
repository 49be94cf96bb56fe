"""``__consumer_offsets`` is created as an internal topic when a broker registers: owned by
the internal organisation, compacted, in the metadata log, and in no tenant's topic list."""

from __future__ import annotations

import pytest

from backend.cluster import metadata_log, services
from backend.cluster.internal_topics import INTERNAL_ORGANISATION_SLUG, OFFSETS_TOPIC
from backend.topics.models import Topic
from backend.topics.selectors import topic_list

from .conftest import World, key_client


@pytest.fixture
def internal_topics_on(settings):
    settings.SLUICE_CREATE_INTERNAL_TOPICS = True


def test_offsets_topic_waits_for_its_replicas_then_is_hidden(world: World, internal_topics_on):
    assert not Topic.objects.filter(name=OFFSETS_TOPIC).exists()  # no broker yet
    services.broker_register(broker_id=1, url="http://127.0.0.1:9092")
    services.broker_register(broker_id=2, url="http://127.0.0.1:9093")
    # fewer live brokers than its replication factor (3), inside the grace period: not yet
    assert not Topic.objects.filter(name=OFFSETS_TOPIC).exists()
    services.broker_register(broker_id=3, url="http://127.0.0.1:9094")
    topic = Topic.objects.get(name=OFFSETS_TOPIC)
    assert topic.organisation.slug == INTERNAL_ORGANISATION_SLUG
    assert topic.configs["cleanup.policy"] == "compact"
    assert topic.replication_factor == 3
    record = next(
        r
        for r in metadata_log.image().records
        if r["kind"] == "topic" and r["value"]["name"] == OFFSETS_TOPIC
    )
    assert len(record["value"]["partitions"]) == topic.partitions
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in record["value"]["partitions"])
    services.broker_register(broker_id=4, url="http://127.0.0.1:9095")
    assert Topic.objects.filter(name=OFFSETS_TOPIC).count() == 1  # made once
    for tenant in (world.a, world.b):
        assert OFFSETS_TOPIC not in [t.name for t in topic_list(organisation=tenant.org)]
        answer = key_client(tenant.token("admin")).get("/api/v1/topics/")
        assert OFFSETS_TOPIC not in answer.content.decode()


def test_a_small_cluster_gets_them_after_the_grace_period(world: World, internal_topics_on):
    from datetime import timedelta

    from django.utils import timezone

    from backend.cluster.models import Broker

    broker = services.broker_register(broker_id=1, url="http://127.0.0.1:9092")
    assert not Topic.objects.filter(name=OFFSETS_TOPIC).exists()
    Broker.objects.filter(pk=broker.pk).update(registered_at=timezone.now() - timedelta(seconds=60))
    broker.refresh_from_db()
    services.broker_heartbeat(
        broker=broker, metadata_version=broker.epoch, broker_epoch=broker.epoch
    )
    topic = Topic.objects.get(name=OFFSETS_TOPIC)
    assert topic.replication_factor == 1  # capped by the one live broker
