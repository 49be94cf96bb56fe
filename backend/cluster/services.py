"""Cluster writes: broker registration and heartbeats, partition assignment, and the
publishers the other apps' services call so every change appends its metadata record in the
same transaction (docs/metadata-log.md lists the record kinds)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.db import transaction
from django.utils import timezone

from backend.cluster import metadata_log, partitions, placement
from backend.cluster.errors import StaleBrokerEpoch
from backend.cluster.internal_topics import ensure_internal_topics
from backend.cluster.models import Broker, PartitionAssignment, ReplicaLogReport
from backend.cluster.selectors import live_broker_ids
from brokernodes.replication.controller import (
    PartitionRegistration,
    place_partition_increase,
    unclean_restart,
)

# record kinds
BROKER = "broker"
TOPIC = "topic"
API_KEY = "api_key"
ACL = "acl"
QUOTA = "quota"


# --- brokers ---------------------------------------------------------------------------


def broker_record(broker: Broker) -> dict:
    record = {
        "id": broker.broker_id,
        "url": broker.url,
        "epoch": broker.epoch,
        "fenced": broker.fenced,
    }
    if broker.kafka:  # the Kafka listener clients are told of (absent: it has none)
        record["kafka"] = broker.kafka
    return record


@transaction.atomic
def broker_register(
    *, broker_id: int, url: str, clean_shutdown: bool = True, kafka: str | None = None
) -> Broker:
    """Register (or re-register) a broker: a new broker epoch (the version of its broker
    record, so larger on every registration), unfenced and not shutting down. After an
    unclean shutdown it leaves the ISR and ELR of its partitions (``unclean_restart``: it may
    have lost its unflushed tail) for their last known ELR, except where it is the only
    replica. Its log reports from earlier registrations are dropped. Partitions that had no
    live broker to go to are placed now. ``kafka``: its Kafka listener's advertised
    "host:port" (None: it has none), published in its broker record."""
    url = url.rstrip("/")
    now = timezone.now()
    head = metadata_log.lock()
    broker = Broker.objects.select_for_update().filter(broker_id=broker_id).first()
    if broker is None:
        broker = Broker(broker_id=broker_id, registered_at=now)
    broker.url = url
    broker.kafka = kafka or ""
    broker.last_heartbeat_at = now
    broker.epoch = head + 1  # the version the broker record below gets
    broker.fenced = False
    broker.shutting_down = False
    broker.save()
    version = metadata_log.append(BROKER, str(broker_id), broker_record(broker))
    assert version == broker.epoch
    # reports from an earlier registration are void: the log may have changed since
    ReplicaLogReport.objects.filter(broker_id=broker_id).exclude(broker_epoch=broker.epoch).delete()
    if not clean_shutdown:
        changed = {}
        for a in PartitionAssignment.objects.select_related("topic").order_by("pk"):
            if list(a.replicas) == [broker_id]:
                continue  # the only copy: nothing better to wait for (docs/controller.md)
            if broker_id in a.isr or broker_id in (a.elr or ()):
                new = unclean_restart(partitions.registration(a), broker_id)
                if new is not None:
                    changed[a] = new
        commit_partition_changes(changed)
    assign_unplaced_partitions()
    ensure_internal_topics(publish_topic)  # __consumer_offsets, once a broker can hold it
    return broker


@transaction.atomic
def broker_heartbeat(
    *,
    broker: Broker,
    metadata_version: int,
    broker_epoch: int | None = None,
    replica_logs: Iterable[Mapping] = (),
) -> Broker:
    """A broker is alive. A heartbeat from an older registration is refused (it must
    register again). A fenced broker is unfenced once it has seen the record that fenced
    it (so it knows it lost its leaderships), as KRaft unfences a caught-up broker. One
    that comes back may take partitions created while no broker was live. ``replica_logs``
    (its logs of partitions it sees offline) are stored for unclean recovery."""
    metadata_log.lock()
    broker = Broker.objects.select_for_update().get(pk=broker.pk)
    if broker_epoch is not None and broker_epoch != broker.epoch:
        raise StaleBrokerEpoch(
            f"broker {broker.broker_id} heartbeat with epoch {broker_epoch}, but its current "
            f"registration has epoch {broker.epoch}: register again"
        )
    was_live = broker.broker_id in live_broker_ids()
    broker.last_heartbeat_at = timezone.now()
    broker.metadata_version = max(int(metadata_version), 0)
    fields = ["last_heartbeat_at", "metadata_version"]
    if (
        broker.fenced
        and not broker.shutting_down
        and broker_epoch is not None
        and broker.metadata_version >= broker.fenced_at_version
    ):
        broker.fenced = False
        fields.append("fenced")
        metadata_log.append(BROKER, str(broker.broker_id), broker_record(broker))
    broker.save(update_fields=fields)
    if broker_epoch is not None:
        record_replica_logs(broker, replica_logs)
    if not was_live:
        assign_unplaced_partitions()
    # after the grace period, when fewer brokers than wanted are live
    ensure_internal_topics(publish_topic)
    return broker


def record_replica_logs(broker: Broker, reports: Iterable[Mapping]) -> int:
    """Store what ``broker`` (its current registration) reported of its logs of offline
    partitions: ``{"topic_id", "partition", "last_leader_epoch", "log_end_offset"}`` each
    (KIP-966's GetReplicaLogInfo answer). Partitions it does not replicate are ignored; an
    unchanged report is not written again (heartbeats repeat them while offline). Returns
    how many rows were written."""
    wanted = {(str(r["topic_id"]), int(r["partition"])): r for r in reports}
    if not wanted:
        return 0
    rows = PartitionAssignment.objects.filter(
        topic__topic_id__in={t for t, _ in wanted}
    ).select_related("topic")
    have = {
        r.assignment_id: r
        for r in ReplicaLogReport.objects.filter(broker_id=broker.broker_id, assignment__in=rows)
    }
    written = 0
    for a in rows:
        r = wanted.get((str(a.topic.topic_id), a.partition))
        if r is None or broker.broker_id not in a.replicas:
            continue
        values = {
            "broker_epoch": broker.epoch,
            "last_leader_epoch": int(r["last_leader_epoch"]),
            "log_end_offset": int(r["log_end_offset"]),
        }
        old = have.get(a.pk)
        if old is not None and all(getattr(old, k) == v for k, v in values.items()):
            continue
        ReplicaLogReport.objects.update_or_create(
            assignment=a, broker_id=broker.broker_id, defaults=values
        )
        written += 1
    return written


def commit_partition_changes(changes: Mapping[PartitionAssignment, PartitionRegistration]) -> int:
    """Save new registrations and append one topic record per topic touched (the caller
    holds the metadata lock in its transaction). Returns how many partitions changed."""
    topics = {}
    for a, reg in changes.items():
        partitions.apply(a, reg)
        topics[a.topic_id] = a.topic
    for topic in topics.values():
        metadata_log.append(TOPIC, str(topic.topic_id), topic_record(topic))
    return len(changes)


# --- topics and assignments ------------------------------------------------------------


def _cluster_load(brokers: list[int]) -> placement.ClusterLoad:
    return placement.ClusterLoad.of(
        PartitionAssignment.objects.values_list("replicas", flat=True), brokers
    )


def _assign(topic, new: Iterable[int]) -> None:
    """Replica lists for the topic's ``new`` partitions. A partition increase goes through
    the controller core (``place_partition_increase``: the topic's own replication factor,
    balanced within the topic) when enough brokers are live; otherwise, and for a new
    topic, ``placement.place`` (balanced cluster-wide, RF capped by the live brokers)."""
    new = list(new)
    brokers = live_broker_ids()
    existing = [
        list(r)
        for r in topic.assignments.exclude(partition__in=new).values_list("replicas", flat=True)
        if r
    ]
    lists: list[list[int]] | None = None
    if existing and brokers:
        try:
            lists = [list(r) for r in place_partition_increase(existing, brokers, len(new))]
        except ValueError:
            lists = None
    if lists is None:
        lists = placement.place(brokers, len(new), topic.replication_factor, _cluster_load(brokers))
    for p, replicas in zip(new, lists, strict=True):
        PartitionAssignment.objects.update_or_create(
            topic=topic,
            partition=p,
            defaults={
                "replicas": replicas,
                "leader": replicas[0] if replicas else -1,
                "leader_epoch": 0,
                "isr": list(replicas),
                "partition_epoch": 0,
                "elr": [],
                "last_known_elr": [],
                "adding_replicas": [],
                "removing_replicas": [],
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
                "partition_epoch": a.partition_epoch if a else 0,
                "elr": list(a.elr or ()) if a else [],
                "last_known_elr": list(a.last_known_elr or ()) if a else [],
                "adding_replicas": list(a.adding_replicas or ()) if a else [],
                "removing_replicas": list(a.removing_replicas or ()) if a else [],
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
    metadata_log.lock()  # before any assignment row: the lock order of every writer
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
