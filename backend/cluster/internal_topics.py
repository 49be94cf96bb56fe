"""Cluster-wide internal topics: ``__consumer_offsets`` (docs/consumer-groups.md),
``__transaction_state`` (docs/transactions.md) and ``__usage`` (the brokers' usage metering,
docs/analytics.md).

Tenants cannot name topics starting with ``__`` (``topics.configs``), so internal topics
belong to one internal organisation (slug ``sluice-internal``) that no user or service
account is a member of: its topics reach every broker through the metadata log like any
other topic (placement, leaders, ISR), while no tenant view lists them and no tenant key can
read them. Brokers find ``__consumer_offsets`` by name
(``brokernodes.server.coordinator.offsets_topic``).

``ensure_internal_topics`` runs when a broker registers or heartbeats
(``cluster.services``). Its replication factor is ``SLUICE_OFFSETS_TOPIC_REPLICATION_FACTOR``
(default 3). It waits until that many brokers are live, or until the first live broker has been
registered for ``SLUICE_INTERNAL_TOPICS_GRACE_S`` (default 10 s), then creates the topics with
the replication factor capped by the live brokers: a cluster starting its brokers together
gets fully replicated internal topics, a smaller cluster gets them after the grace period
(Kafka instead refuses until ``offsets.topic.replication.factor`` brokers exist).
``__consumer_offsets`` has ``SLUICE_OFFSETS_TOPIC_PARTITIONS`` partitions (default 12; Kafka's
50 is more than a small cluster needs, and the count can only grow, which would move groups).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

logger = logging.getLogger("backend.cluster")

INTERNAL_ORGANISATION_SLUG = "sluice-internal"
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = int(os.environ.get("SLUICE_OFFSETS_TOPIC_PARTITIONS", "12"))
OFFSETS_REPLICATION_FACTOR = int(os.environ.get("SLUICE_OFFSETS_TOPIC_REPLICATION_FACTOR", "3"))
GRACE_S = float(os.environ.get("SLUICE_INTERNAL_TOPICS_GRACE_S", "10"))
OFFSETS_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(16 * 1024 * 1024)}
# __usage: every broker appends one record per tenant/principal/topic a minute (to a partition
# it leads, or through a leader); kept a week (the analytics store what they computed from it).
USAGE_TOPIC = "__usage"
USAGE_PARTITIONS = int(os.environ.get("SLUICE_USAGE_TOPIC_PARTITIONS", "3"))
USAGE_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "segment.bytes": str(16 * 1024 * 1024),
}
# __transaction_state: the transaction coordinators' state (docs/transactions.md), compacted
# and replicated like __consumer_offsets; its partition count, too, can only grow.
TXN_STATE_TOPIC = "__transaction_state"
TXN_STATE_PARTITIONS = int(os.environ.get("SLUICE_TXN_STATE_TOPIC_PARTITIONS", "12"))
INTERNAL_TOPICS = (
    (OFFSETS_TOPIC, OFFSETS_PARTITIONS, OFFSETS_CONFIGS),
    (USAGE_TOPIC, USAGE_PARTITIONS, USAGE_CONFIGS),
    (TXN_STATE_TOPIC, TXN_STATE_PARTITIONS, OFFSETS_CONFIGS),
)


def internal_organisation():
    """The organisation that owns the cluster's internal topics (made on first use)."""
    from backend.tenancy.models import Organisation

    org, _ = Organisation.objects.get_or_create(
        slug=INTERNAL_ORGANISATION_SLUG, defaults={"name": "Sluice internal topics"}
    )
    return org


@transaction.atomic
def ensure_internal_topics(publish_topic: Callable[[Any], int]) -> None:
    """Create the internal topics that do not exist yet, once enough brokers are live to hold
    them (see the module docstring). ``publish_topic`` is the cluster service that places a
    new topic and appends its record: passed in, so this module never imports the services
    that call it."""
    from backend.cluster.models import Broker
    from backend.cluster.selectors import live_broker_ids
    from backend.topics.models import Topic

    if not getattr(settings, "SLUICE_CREATE_INTERNAL_TOPICS", True):
        return  # the unit tests' settings
    names = [name for name, _, _ in INTERNAL_TOPICS]
    have = Topic.objects.filter(
        organisation__slug=INTERNAL_ORGANISATION_SLUG, name__in=names
    ).count()
    if have == len(names):
        return
    live = live_broker_ids()
    if not live:
        return
    if len(live) < OFFSETS_REPLICATION_FACTOR:
        first = Broker.objects.filter(broker_id__in=live).aggregate(Min("registered_at"))
        since = first["registered_at__min"]
        if since is None or timezone.now() - since < timedelta(seconds=GRACE_S):
            return  # more brokers may be starting: placed now, they would stay under-replicated
    org = internal_organisation()
    if org.memberships.exists() or org.service_accounts.exists():
        # someone signed up with the reserved slug: never hand them the internal topics
        logger.error(
            "organisation %r has members; internal topics are not created in it (rename it)",
            INTERNAL_ORGANISATION_SLUG,
        )
        return
    for name, partitions, configs in INTERNAL_TOPICS:
        if Topic.objects.filter(organisation=org, name=name).exists():
            continue
        topic = Topic.objects.create(
            organisation=org,
            name=name,
            partitions=partitions,
            replication_factor=max(1, min(OFFSETS_REPLICATION_FACTOR, len(live))),
            configs=dict(configs),
        )
        publish_topic(topic)
