"""Reads of the reports; every one takes the organisation, so no query is unscoped."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from backend.analytics.models import (
    CompactionRow,
    JobRun,
    LagRow,
    QuotaSuggestion,
    RetentionRow,
    RunProblem,
    SkewRow,
    ThroughputPeak,
    ThroughputRow,
    UsageRow,
)

MAX_RUNS = 200


MAX_PROBLEMS_SHOWN = 20


def run_list(*, job: str | None = None, limit: int = 50, organisation=None) -> QuerySet[JobRun]:
    """Recent runs: with ``organisation``, the cluster-wide runs and that organisation's own
    (never another tenant's); without, every run (operators). The API shows tenants the safe
    error summary only."""
    qs = JobRun.objects.all()
    if organisation is not None:
        qs = qs.filter(Q(organisation__isnull=True) | Q(organisation=organisation))
    if job:
        qs = qs.filter(job=job)
    return qs[: min(limit, MAX_RUNS)]


def lag_rows(*, organisation, group: str | None = None, hours: float = 24) -> QuerySet[LagRow]:
    since = timezone.now() - timedelta(hours=hours)
    qs = LagRow.objects.filter(organisation=organisation, kind="sample", ts__gte=since)
    if group:
        qs = qs.filter(group_id=group)
    return qs.order_by("ts", "group_id", "topic", "partition")


def lag_current(*, organisation, group: str | None = None) -> QuerySet[LagRow]:
    qs = LagRow.objects.filter(organisation=organisation, kind="now")
    if group:
        qs = qs.filter(group_id=group)
    return qs.order_by("group_id", "topic", "partition")


def throughput_rows(
    *, organisation, topic: str | None = None, granularity: str = "minute", hours: float = 24
) -> QuerySet[ThroughputRow]:
    since = timezone.now() - timedelta(hours=hours)
    qs = ThroughputRow.objects.filter(
        organisation=organisation, granularity=granularity, ts__gte=since
    )
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("ts", "topic", "partition")


def retention_rows(*, organisation) -> QuerySet[RetentionRow]:
    return (
        RetentionRow.objects.filter(organisation=organisation)
        .select_related("run")
        .order_by("topic", "partition")
    )


def usage_rows(*, organisation, granularity: str = "hour", days: float = 7) -> QuerySet[UsageRow]:
    since = timezone.now() - timedelta(days=days)
    return UsageRow.objects.filter(
        organisation=organisation, granularity=granularity, ts__gte=since
    ).order_by("ts", "service_account", "topic")


def quota_suggestions(*, organisation) -> QuerySet[QuotaSuggestion]:
    return QuotaSuggestion.objects.filter(organisation=organisation).order_by("service_account")


def peak_rows(*, organisation, topic: str | None = None) -> QuerySet[ThroughputPeak]:
    qs = ThroughputPeak.objects.filter(organisation=organisation)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("topic")


def skew_rows(
    *, organisation, topic: str | None = None, hours: float = 24, hot_only: bool = False
) -> QuerySet[SkewRow]:
    since = timezone.now() - timedelta(hours=hours)
    qs = SkewRow.objects.filter(organisation=organisation, ts__gte=since)
    if topic:
        qs = qs.filter(topic=topic)
    if hot_only:
        qs = qs.filter(hot_partition__isnull=False)
    return qs.order_by("ts", "topic")


def compaction_rows(*, organisation, topic: str | None = None) -> QuerySet[CompactionRow]:
    qs = CompactionRow.objects.filter(organisation=organisation)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("topic", "partition")


def run_problems(*, organisation, runs) -> dict:
    """``{run id: (unreadable batch count, the first problems)}`` of ``organisation`` in
    ``runs``: what each run skipped or failed for that tenant only."""
    ids = [r.id for r in runs]
    out: dict = {}
    for p in RunProblem.objects.filter(organisation=organisation, run_id__in=ids).order_by(
        "run_id", "kind", "topic", "partition", "offset"
    ):
        count, shown = out.setdefault(p.run_id, [0, []])
        if p.kind == "unreadable_batch":
            out[p.run_id][0] = count + 1
        if len(shown) < MAX_PROBLEMS_SHOWN:
            shown.append(p)
    return out
