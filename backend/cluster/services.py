"""Cluster writes: broker registration and heartbeats, partition assignment, and the
publishers the other apps' services call so every change appends its metadata record in the
same transaction (docs/metadata-log.md lists the record kinds)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.cluster import metadata_log, placement
from backend.cluster.models import Broker, PartitionAssignment

# record kinds
BROKER = "broker"
TOPIC = "topic"
API_KEY = "api_key"
ACL = "acl"
QUOTA = "quota"


def live_broker_ids() -> list[int]:
    horizon = timezone.now() - timedelta(seconds=float(settings.SLUICE_BROKER_SESSION_TIMEOUT_S))
    return list(
        Broker.objects.filter(last_heartbeat_at__gte=horizon).values_list("broker_id", flat=True)
    )


# --- brokers ---------------------------------------------------------------------------


@transaction.atomic
def broker_register(*, broker_id: int, url: str) -> Broker:
    """Register (or re-register) a broker; it becomes live, and partitions that had no live
    broker to go to are placed now."""
    url = url.rstrip("/")
    now = timezone.now()
    broker, created = Broker.objects.get_or_create(
        broker_id=broker_id, defaults={"url": url, "last_heartbeat_at": now}
    )
    if created or broker.url != url:
        broker.url = url
        metadata_log.append(BROKER, str(broker_id), {"id": broker_id, "url": url})
    broker.last_heartbeat_at = now
    broker.save()
    assign_unplaced_partitions()
    return broker


@transaction.atomic
def broker_heartbeat(*, broker: Broker, metadata_version: int) -> Broker:
    """A broker is alive. One that comes back (its session had expired, e.g. the control
    plane was down) may take partitions created while no broker was live."""
    was_live = broker.broker_id in live_broker_ids()
    broker.last_heartbeat_at = timezone.now()
    broker.metadata_version = max(int(metadata_version), 0)
    broker.save(update_fields=["last_heartbeat_at", "metadata_version"])
    if not was_live:
        assign_unplaced_partitions()
    return broker


# --- topics and assignments ------------------------------------------------------------


def _cluster_load(brokers: list[int]) -> placement.ClusterLoad:
    return placement.ClusterLoad.of(
        PartitionAssignment.objects.values_list("replicas", flat=True), brokers
    )


def _assign(topic, partitions: Iterable[int]) -> None:
    partitions = list(partitions)
    brokers = live_broker_ids()
    lists = placement.place(
        brokers, len(partitions), topic.replication_factor, _cluster_load(brokers)
    )
    for p, replicas in zip(partitions, lists, strict=True):
        PartitionAssignment.objects.update_or_create(
            topic=topic,
            partition=p,
            defaults={
                "replicas": replicas,
                "leader": replicas[0] if replicas else -1,
                "leader_epoch": 0,
                "isr": list(replicas),
            },
        )


def topic_record(topic) -> dict:
    assignments = {a.partition: a for a in topic.assignments.all()}
    parts = []
    for p in range(topic.partitions):
        a = assignments.get(p)
        parts.append(
            {
                "partition": p,
                "leader": a.leader if a else -1,
                "leader_epoch": a.leader_epoch if a else 0,
                "replicas": list(a.replicas) if a else [],
                "isr": list(a.isr) if a else [],
            }
        )
    return {
        "topic_id": str(topic.topic_id),
        "organisation": str(topic.organisation_id),
        "name": topic.name,
        "configs": dict(topic.configs),
        "partitions": parts,
    }


def publish_topic(topic) -> int:
    """Place partitions that have no assignment yet, then append the topic's record."""
    have = set(topic.assignments.values_list("partition", flat=True))
    missing = [p for p in range(topic.partitions) if p not in have]
    if missing:
        _assign(topic, missing)
    return metadata_log.append(TOPIC, str(topic.topic_id), topic_record(topic))


def publish_topic_deleted(topic_id) -> int:
    return metadata_log.append(TOPIC, str(topic_id), None)


def assign_unplaced_partitions() -> None:
    """Partitions created while no broker was live get brokers now (and a new record)."""
    if not live_broker_ids():
        return
    from backend.topics.models import Topic

    unplaced = [a for a in PartitionAssignment.objects.filter(leader=-1) if not a.replicas]
    for a in unplaced:
        a.delete()
    for topic in Topic.objects.filter(pk__in={a.topic_id for a in unplaced}):
        publish_topic(topic)


# --- keys, ACLs, quotas -----------------------------------------------------------------


def _broker_key_id(key_id: str) -> str:
    from backend.keys.tokens import broker_key_id

    return broker_key_id(key_id)


def publish_api_key(api_key) -> int:
    """The key's hash while it can authenticate; a tombstone once revoked or its service
    account or organisation is inactive."""
    sa = api_key.service_account
    usable = api_key.revoked_at is None and sa.is_active and sa.organisation.is_active
    value = (
        {
            "key_id": _broker_key_id(api_key.key_id),
            "secret_sha256": api_key.secret_sha256,
            "principal": f"User:{sa.name}",
            "organisation": str(api_key.organisation_id),
            "role": sa.role,
        }
        if usable
        else None
    )
    return metadata_log.append(API_KEY, _broker_key_id(api_key.key_id), value)


def publish_api_key_deleted(key_id: str) -> int:
    return metadata_log.append(API_KEY, _broker_key_id(key_id), None)


def publish_service_account_keys(service_account, *, deleted: bool = False) -> None:
    """A service account's role, activity or existence changed: republish its keys."""
    for key in service_account.api_keys.filter(revoked_at__isnull=True):
        if deleted:
            publish_api_key_deleted(key.key_id)
        else:
            publish_api_key(key)
    if deleted:
        from backend.quotas.models import Quota

        for quota_id in Quota.objects.filter(service_account=service_account).values_list(
            "id", flat=True
        ):
            publish_quota_deleted(quota_id)


def publish_acl(binding) -> int:
    return metadata_log.append(
        ACL, str(binding.id), {"organisation": str(binding.organisation_id), **binding.as_dict()}
    )


def publish_acl_deleted(binding_id) -> int:
    return metadata_log.append(ACL, str(binding_id), None)


def publish_quota(quota) -> int:
    from backend.quotas.models import QUOTA_FIELDS

    sa = quota.service_account
    return metadata_log.append(
        QUOTA,
        str(quota.id),
        {
            "organisation": str(quota.organisation_id),
            "principal": f"User:{sa.name}" if sa is not None else None,
            "limits": {f: getattr(quota, f) for f in QUOTA_FIELDS},
        },
    )


def publish_quota_deleted(quota_id) -> int:
    return metadata_log.append(QUOTA, str(quota_id), None)
