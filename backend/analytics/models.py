"""Job runs and the report rows they store (docs/analytics.md).

A ``JobRun`` is cluster-wide (one Spark job reads every tenant's topics; operators and the
schedule queue those) or scoped to one organisation (a tenant admin's request); every result
row belongs to one organisation, so the reports API serves each tenant its own rows only.
What a run could not read or compute for one tenant is a ``RunProblem`` of that tenant. Rows
that a later run recomputes (a lag sample, a throughput or usage period) are upserted on their
natural key; the retention report and quota suggestions are replaced per run; storage points
accumulate (the usage job integrates them into GB-hours).
"""

from __future__ import annotations

import uuid

from django.db import models

JOBS = ("lag", "throughput", "retention", "usage")
STATUSES = ("queued", "running", "succeeded", "failed")
ORG = "tenancy.Organisation"


class JobRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.CharField(max_length=16, choices=[(j, j) for j in JOBS])
    status = models.CharField(max_length=16, choices=[(s, s) for s in STATUSES], default="queued")
    trigger = models.CharField(max_length=16, default="schedule")  # schedule | manual
    requested_by = models.CharField(max_length=200, blank=True, default="")
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    rows_written = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")  # operators' detail (logs too)
    error_summary = models.CharField(max_length=300, blank=True, default="")  # tenants see this
    # null: cluster-wide (every tenant); else the one organisation the run reads
    organisation = models.ForeignKey(
        ORG, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-queued_at"]


PROBLEM_KINDS = ("unreadable_batch", "tenant_failed")


class RunProblem(models.Model):
    """What a run skipped for one tenant: a batch of its log no job could decode
    (``unreadable_batch``, at ``topic``/``partition``/``offset``), or the tenant's share of
    the job failing on its own (``tenant_failed``) while the other tenants' rows were
    stored. ``reason`` is safe to show that tenant (its own topic, a stable code)."""

    run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="problems")
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=[(k, k) for k in PROBLEM_KINDS])
    topic = models.CharField(max_length=249, blank=True, default="")
    partition = models.IntegerField(null=True)
    offset = models.BigIntegerField(null=True)
    reason = models.CharField(max_length=300)

    class Meta:
        ordering = ["topic", "partition", "offset"]
        indexes = [models.Index(fields=["run", "organisation"], name="run_problem_run_org")]


class LagRow(models.Model):
    """A lag sample (``kind`` sample) or a partition's evaluation at a run (``kind`` now)."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    kind = models.CharField(max_length=8, default="sample")
    ts = models.DateTimeField()
    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    committed_offset = models.BigIntegerField()
    log_end_offset = models.BigIntegerField()
    offset_lag = models.BigIntegerField()
    time_lag_ms = models.BigIntegerField(null=True)
    status = models.CharField(max_length=8)
    catch_up_s = models.FloatField(null=True)
    retention_risk = models.BooleanField(null=True)

    class Meta:
        ordering = ["ts", "group_id", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "kind", "group_id", "topic", "partition", "ts"],
                name="uniq_lag_row",
            )
        ]
        indexes = [models.Index(fields=["organisation", "ts"], name="lag_org_ts")]


class ThroughputRow(models.Model):
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    granularity = models.CharField(max_length=8)  # minute | hour
    ts = models.DateTimeField()
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    records = models.BigIntegerField()
    bytes = models.BigIntegerField()

    class Meta:
        ordering = ["ts", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "granularity", "topic", "partition", "ts"],
                name="uniq_throughput_row",
            )
        ]
        indexes = [models.Index(fields=["organisation", "granularity", "ts"], name="tp_org_ts")]


class RetentionRow(models.Model):
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    bytes = models.BigIntegerField()
    segments = models.IntegerField()
    oldest_ts = models.DateTimeField(null=True)
    delete_1h_bytes = models.BigIntegerField()
    delete_6h_bytes = models.BigIntegerField()
    delete_24h_bytes = models.BigIntegerField()
    delete_1h_records = models.BigIntegerField()
    delete_6h_records = models.BigIntegerField()
    delete_24h_records = models.BigIntegerField()

    class Meta:
        ordering = ["topic", "partition"]


class StorageSample(models.Model):
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    topic = models.CharField(max_length=249)
    ts = models.DateTimeField()
    bytes = models.BigIntegerField()

    class Meta:
        ordering = ["ts", "topic"]
        indexes = [models.Index(fields=["organisation", "ts"], name="storage_org_ts")]


class UsageRow(models.Model):
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    granularity = models.CharField(max_length=8)  # hour | day
    ts = models.DateTimeField()
    service_account = models.CharField(max_length=200)  # "" for topic-level storage rows
    topic = models.CharField(max_length=249)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    records_in = models.BigIntegerField(default=0)
    records_out = models.BigIntegerField(default=0)
    requests = models.BigIntegerField(default=0)
    throttle_ms = models.BigIntegerField(default=0)
    storage_gb_hours = models.FloatField(default=0.0)

    class Meta:
        ordering = ["ts", "service_account", "topic"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "granularity", "service_account", "topic", "ts"],
                name="uniq_usage_row",
            )
        ]
        indexes = [models.Index(fields=["organisation", "granularity", "ts"], name="usage_org_ts")]


class QuotaSuggestion(models.Model):
    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    service_account = models.CharField(max_length=200)
    minutes = models.IntegerField()
    p99_produce_bytes_per_sec = models.FloatField()
    p99_fetch_bytes_per_sec = models.FloatField()
    p99_requests_per_sec = models.FloatField()
    produce_bytes_per_sec = models.BigIntegerField()
    fetch_bytes_per_sec = models.BigIntegerField()
    request_rate = models.BigIntegerField()

    class Meta:
        ordering = ["service_account"]


class ThroughputPeak(models.Model):
    """A topic's busiest minute over the throughput run's look-back (replaced per run)."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    topic = models.CharField(max_length=249)
    peak_ts = models.DateTimeField()
    peak_records = models.BigIntegerField()
    peak_bytes = models.BigIntegerField()
    mean_records = models.FloatField()

    class Meta:
        ordering = ["topic"]


class SkewRow(models.Model):
    """Per topic and hour: the busiest partition's share and whether it is hot (upserted)."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    ts = models.DateTimeField()
    topic = models.CharField(max_length=249)
    busiest_partition = models.IntegerField()
    max_share = models.FloatField()
    skew = models.FloatField()
    hot_partition = models.IntegerField(null=True)

    class Meta:
        ordering = ["ts", "topic"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "topic", "ts"], name="uniq_skew_row")
        ]
        indexes = [models.Index(fields=["organisation", "ts"], name="skew_org_ts")]


class CompactionRow(models.Model):
    """Compaction effectiveness of a compacted topic's partition (replaced per run)."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(JobRun, on_delete=models.SET_NULL, null=True, related_name="+")
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    records = models.BigIntegerField()
    distinct_keys = models.BigIntegerField()
    tombstones = models.BigIntegerField()
    keyless = models.BigIntegerField()
    effectiveness = models.FloatField(null=True)

    class Meta:
        ordering = ["topic", "partition"]


# --- live analytics (spark/jobs/live.py; docs/analytics.md "Live analytics") ------------------
# Minute rows the live job upserts by key and trims after SLUICE_ANALYTICS_LIVE_RETENTION_H.


class LiveLagPartitionMinute(models.Model):
    """A group partition's lag sampled in a minute (the last sample of the minute wins):
    its last commit carried forward against the log end then; ``log_end_offset`` and
    ``offset_lag`` are null when the log end could not be sampled."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    minute = models.DateTimeField()
    sampled_at = models.DateTimeField()
    committed_offset = models.BigIntegerField()
    log_end_offset = models.BigIntegerField(null=True)
    offset_lag = models.BigIntegerField(null=True)

    class Meta:
        ordering = ["minute", "group_id", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "group_id", "topic", "partition", "minute"],
                name="uniq_live_lag_partition",
            )
        ]
        indexes = [models.Index(fields=["organisation", "minute"], name="live_lagp_org_min")]


class LiveLagMinute(models.Model):
    """A group's lag on a topic in a minute: its partitions' lags summed (``offset_lag``
    null when none could be measured); ``partitions`` with a commit, ``measured`` of them."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    minute = models.DateTimeField()
    sampled_at = models.DateTimeField()
    offset_lag = models.BigIntegerField(null=True)
    partitions = models.IntegerField()
    measured = models.IntegerField()
    topic_partitions = models.IntegerField()

    class Meta:
        ordering = ["minute", "group_id", "topic"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "group_id", "topic", "minute"], name="uniq_live_lag"
            )
        ]
        indexes = [models.Index(fields=["organisation", "minute"], name="live_lag_org_min")]


class LiveThroughputMinute(models.Model):
    """A topic's records and bytes in (produced) and out (fetched) in a minute, from the
    brokers' ``__usage`` windows (absolute totals, upserted as more windows arrive)."""

    organisation = models.ForeignKey(ORG, on_delete=models.CASCADE, related_name="+")
    topic = models.CharField(max_length=249)
    minute = models.DateTimeField()
    records_in = models.BigIntegerField()
    bytes_in = models.BigIntegerField()
    records_out = models.BigIntegerField()
    bytes_out = models.BigIntegerField()

    class Meta:
        ordering = ["minute", "topic"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "topic", "minute"], name="uniq_live_throughput"
            )
        ]
        indexes = [models.Index(fields=["organisation", "minute"], name="live_tp_org_min")]


LIVE_STREAMS = ("lag", "throughput")


class LiveStream(models.Model):
    """How far each live series is measured, cluster-wide: from ``measured_from`` (earlier
    minutes are not measured) to ``as_of`` (the last lag sample; the time the usage stream
    had read everything there was)."""

    name = models.CharField(max_length=16, primary_key=True, choices=[(s, s) for s in LIVE_STREAMS])
    measured_from = models.DateTimeField()
    as_of = models.DateTimeField()
    # who measured it last: the live Spark job ("spark", authoritative) or the control
    # plane's sampler of the brokers' metrics ("sampler", the fallback; live_sampler.py)
    source = models.CharField(max_length=8, default="spark")


class LiveCounterReading(models.Model):
    """The control plane's sampler (``live_sampler``): the last reading of one broker's
    byte and record counters, ``{"<tenant>/<topic>": [records_in, bytes_in,
    records_out, bytes_out]}``, so the next reading's growth can be spread over the minutes
    between the two."""

    broker_id = models.IntegerField(primary_key=True)
    read_at = models.DateTimeField()
    counters = models.JSONField(default=dict)
