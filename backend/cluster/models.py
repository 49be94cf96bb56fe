"""The cluster: brokers, partition assignments, and the metadata log brokers pull.

``MetadataRecord`` rows are state records keyed by ``(kind, key)``: ``value`` is the whole new
state of that entity (a topic with its partition assignments, an API key's hash, an ACL...),
``None`` a tombstone. ``ClusterState`` (one row) holds the head ``version`` and
``log_start_version``: records at or below it may have been compacted away, so a broker asking
for changes since an older version gets the full image instead (docs/metadata-log.md).
"""

from __future__ import annotations

from django.db import models


class ClusterState(models.Model):
    """The single row (pk=1) that serialises metadata writers and counts versions."""

    version = models.BigIntegerField(default=0)
    log_start_version = models.BigIntegerField(default=0)


class MetadataRecord(models.Model):
    version = models.BigIntegerField(primary_key=True)
    kind = models.CharField(max_length=32)
    key = models.CharField(max_length=128)
    value = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["version"]
        indexes = [models.Index(fields=["kind", "key"], name="metadata_kind_key")]

    def as_dict(self) -> dict:
        return {"version": self.version, "kind": self.kind, "key": self.key, "value": self.value}


class Broker(models.Model):
    """A registered broker node; live while its heartbeats are recent and it is not fenced.

    ``epoch`` is the broker epoch (KIP-903): the metadata-log version of its latest
    registration, so every registration gets a new, larger one. ``fenced``: the controller
    found its session expired (it leads nothing and may not join an ISR until it heartbeats
    again having seen its fencing). ``shutting_down``: in controlled shutdown (KIP-841)."""

    broker_id = models.PositiveIntegerField(primary_key=True)
    url = models.CharField(max_length=500)
    # "host:port" of its Kafka listener, as clients are told (blank: it has none)
    kafka = models.CharField(max_length=300, blank=True, default="")
    registered_at = models.DateTimeField(auto_now_add=True)
    last_heartbeat_at = models.DateTimeField()
    metadata_version = models.BigIntegerField(default=0)
    epoch = models.BigIntegerField(default=0)
    fenced = models.BooleanField(default=False)
    fenced_at_version = models.BigIntegerField(default=0)
    shutting_down = models.BooleanField(default=False)

    class Meta:
        ordering = ["broker_id"]


class PartitionAssignment(models.Model):
    """Where one partition lives: replicas (the first is the preferred leader), the current
    leader (-1: none) and its epoch, the in-sync replicas, and KRaft's partition epoch
    (bumped by every change), eligible leader replicas and the last known ones an unclean
    recovery chooses among (KIP-966), and the replicas being added
    or removed by a reassignment (KIP-455). ``brokernodes.replication.controller`` decides
    every change; ``backend.cluster.partitions`` converts."""

    topic = models.ForeignKey("topics.Topic", on_delete=models.CASCADE, related_name="assignments")
    partition = models.PositiveIntegerField()
    replicas = models.JSONField(default=list)
    leader = models.IntegerField(default=-1)
    leader_epoch = models.IntegerField(default=0)
    isr = models.JSONField(default=list)
    partition_epoch = models.IntegerField(default=0)
    elr = models.JSONField(default=list)
    last_known_elr = models.JSONField(default=list)
    adding_replicas = models.JSONField(default=list)
    removing_replicas = models.JSONField(default=list)

    class Meta:
        ordering = ["topic_id", "partition"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "partition"], name="uniq_topic_partition")
        ]


class ReplicaLogReport(models.Model):
    """A replica's log as its broker reported it for an offline partition (KIP-966's
    GetReplicaLogInfo, carried by heartbeats): the last leader epoch and log end offset, and
    the broker epoch of the registration that reported it (an older one does not count: the
    broker restarted since, and its log may have changed). Unclean recovery chooses by it."""

    assignment = models.ForeignKey(
        PartitionAssignment, on_delete=models.CASCADE, related_name="log_reports"
    )
    broker_id = models.PositiveIntegerField()
    broker_epoch = models.BigIntegerField()
    last_leader_epoch = models.IntegerField()
    log_end_offset = models.BigIntegerField()
    reported_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["assignment", "broker_id"], name="uniq_replica_log_report"
            )
        ]


class ControllerLease(models.Model):
    """The single row (pk=1) naming the active controller: ``holder`` holds it until
    ``expires_at`` and renews it; a standby takes it once it lapses and bumps ``epoch``
    (the controller epoch). Every controller write locks and checks this row first."""

    holder = models.CharField(max_length=128, blank=True, default="")
    epoch = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
