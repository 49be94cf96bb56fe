"""Topic writes: create (or dry-run), alter configs, add partitions, delete.

Every refusal names the fields at fault; ``validate_only`` runs every check, including the
quotas and the name clash, and writes nothing (no topic, no audit event).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from backend.audit.services import audit_record
from backend.cluster import selectors as cluster_selectors
from backend.cluster import services as cluster
from backend.core.context import RequestContext
from backend.core.exceptions import InvalidConfig, QuotaExceeded, TopicAlreadyExists
from backend.quotas.selectors import quota_for_organisation
from backend.tenancy.models import Organisation
from backend.topics import selectors
from backend.topics.configs import normalise_configs, topic_name_errors
from backend.topics.models import Topic


def topic_snapshot(t: Topic) -> dict:
    return {
        "topic_id": str(t.topic_id),
        "name": t.name,
        "partitions": t.partitions,
        "replication_factor": t.replication_factor,
        "configs": dict(t.configs),
    }


def _lock_organisation(org: Organisation) -> None:
    """Serialise topic changes of one organisation, so quota checks cannot race."""
    Organisation.objects.select_for_update().filter(pk=org.pk).first()


def _check_quota(org: Organisation, *, new_topics: int, new_partitions: int) -> None:
    quota = quota_for_organisation(organisation=org)
    if quota is None:
        return
    topics, partitions = selectors.topic_usage(organisation=org)
    if quota.max_topics is not None and topics + new_topics > quota.max_topics:
        raise QuotaExceeded(
            f"the organisation may have at most {quota.max_topics} topics ({topics} exist)",
            {"name": [f"topic quota of {quota.max_topics} reached"]},
        )
    if quota.max_partitions is not None and partitions + new_partitions > quota.max_partitions:
        left = max(quota.max_partitions - partitions, 0)
        raise QuotaExceeded(
            f"the organisation may have at most {quota.max_partitions} partitions in all "
            f"({partitions} exist, {left} left)",
            {"partitions": [f"at most {left} more partitions fit the quota"]},
        )


def _max_rf() -> int:
    """The largest replication factor: the setting, capped by the live brokers when any are
    registered (with none yet, partitions are placed when the first one registers)."""
    live = len(cluster_selectors.live_broker_ids())
    cap = int(settings.SLUICE_MAX_REPLICATION_FACTOR)
    return min(cap, live) if live else cap


def replication_factor_bounds() -> tuple[int, int]:
    """(default, maximum) replication factor of a new topic: the default is what a create
    without one gets, so the console and the CLI (which sends none) agree."""
    cap = _max_rf()
    return min(settings.SLUICE_DEFAULT_REPLICATION_FACTOR, cap), cap


@transaction.atomic
def topic_create(
    *,
    ctx: RequestContext,
    name: str,
    partitions: int | None = None,
    replication_factor: int | None = None,
    configs: dict[str, Any] | None = None,
    validate_only: bool = False,
) -> Topic:
    org = ctx.organisation
    partitions = settings.SLUICE_DEFAULT_PARTITIONS if partitions is None else partitions
    if replication_factor is None:
        replication_factor = replication_factor_bounds()[0]
    errors: dict[str, list[str]] = {}
    if name_errors := topic_name_errors(name):
        errors["name"] = name_errors
    if not 1 <= partitions <= settings.SLUICE_MAX_PARTITIONS_PER_TOPIC:
        errors["partitions"] = [f"must be between 1 and {settings.SLUICE_MAX_PARTITIONS_PER_TOPIC}"]
    if not 1 <= replication_factor <= _max_rf():
        errors["replication_factor"] = [
            f"must be between 1 and {_max_rf()} (the number of brokers available)"
        ]
    normalised, config_errors = normalise_configs(
        configs or {},
        replication_factor=max(replication_factor, 1),
        max_message_bytes=settings.SLUICE_MAX_MESSAGE_BYTES,
    )
    errors.update(config_errors)
    if errors:
        raise InvalidConfig("the topic's settings are invalid", errors)
    _lock_organisation(org)
    if selectors.topic_list(organisation=org).filter(name=name).exists():
        raise TopicAlreadyExists(f"topic {name!r} already exists", {"name": ["already exists"]})
    _check_quota(org, new_topics=1, new_partitions=partitions)
    topic = Topic(
        organisation=org,
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        configs=normalised,
    )
    if validate_only:
        return topic
    try:
        with transaction.atomic():
            topic.save()
    except IntegrityError:  # a concurrent create of the same name won
        raise TopicAlreadyExists(
            f"topic {name!r} already exists", {"name": ["already exists"]}
        ) from None
    cluster.publish_topic(topic)
    audit_record(
        ctx=ctx,
        action="topic.create",
        object_type="topic",
        object_id=topic.topic_id,
        after=topic_snapshot(topic),
    )
    return topic


@transaction.atomic
def topic_alter_configs(
    *,
    ctx: RequestContext,
    topic: Topic,
    changes: dict[str, Any],
    validate_only: bool = False,
) -> Topic:
    """Incremental alter: a value sets a config, ``None`` deletes the override (default)."""
    merged = dict(topic.configs)
    for k, v in changes.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    normalised, errors = normalise_configs(
        merged,
        replication_factor=topic.replication_factor,
        max_message_bytes=settings.SLUICE_MAX_MESSAGE_BYTES,
    )
    if errors:
        raise InvalidConfig("the topic's configs are invalid", errors)
    before = topic_snapshot(topic)
    topic.configs = normalised
    if validate_only or before["configs"] == normalised:
        return topic
    topic.save(update_fields=["configs", "updated_at"])
    cluster.publish_topic(topic)
    audit_record(
        ctx=ctx,
        action="topic.alter_configs",
        object_type="topic",
        object_id=topic.topic_id,
        before=before,
        after=topic_snapshot(topic),
    )
    return topic


@transaction.atomic
def topic_add_partitions(
    *, ctx: RequestContext, topic: Topic, partitions: int, validate_only: bool = False
) -> Topic:
    """Grow to ``partitions`` in all (Kafka's CreatePartitions); partitions never shrink."""
    if partitions <= topic.partitions:
        raise InvalidConfig(
            "partitions can only be added",
            {"partitions": [f"must be greater than the current {topic.partitions}"]},
        )
    if partitions > settings.SLUICE_MAX_PARTITIONS_PER_TOPIC:
        raise InvalidConfig(
            "too many partitions",
            {"partitions": [f"at most {settings.SLUICE_MAX_PARTITIONS_PER_TOPIC} per topic"]},
        )
    _lock_organisation(ctx.organisation)
    _check_quota(ctx.organisation, new_topics=0, new_partitions=partitions - topic.partitions)
    before = topic_snapshot(topic)
    topic.partitions = partitions
    if validate_only:
        return topic
    topic.save(update_fields=["partitions", "updated_at"])
    cluster.publish_topic(topic)
    audit_record(
        ctx=ctx,
        action="topic.add_partitions",
        object_type="topic",
        object_id=topic.topic_id,
        before=before,
        after=topic_snapshot(topic),
    )
    return topic


@transaction.atomic
def topic_delete(*, ctx: RequestContext, topic: Topic) -> None:
    before = topic_snapshot(topic)
    cluster.publish_topic_deleted(topic.topic_id)
    topic.delete()
    audit_record(
        ctx=ctx,
        action="topic.delete",
        object_type="topic",
        object_id=before["topic_id"],
        before=before,
    )
