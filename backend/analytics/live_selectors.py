"""Reads of the live analytics' minute rows; every one takes the organisation."""

from __future__ import annotations

from django.db.models import QuerySet, Sum

from backend.analytics.models import (
    LiveLagMinute,
    LiveLagPartitionMinute,
    LiveStream,
    LiveThroughputMinute,
)


def stream(name: str) -> LiveStream | None:
    """How far the ``name`` series is measured (cluster-wide, no tenant detail), or None
    when the live job never measured it."""
    return LiveStream.objects.filter(name=name).first()


def lag_minutes(
    *, organisation, since, group: str | None = None, topic: str | None = None
) -> QuerySet[LiveLagMinute]:
    qs = LiveLagMinute.objects.filter(organisation=organisation, minute__gte=since)
    if group:
        qs = qs.filter(group_id=group)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("minute", "group_id", "topic")


def lag_partition_minutes(
    *, organisation, since, group: str | None = None, topic: str | None = None
) -> QuerySet[LiveLagPartitionMinute]:
    qs = LiveLagPartitionMinute.objects.filter(organisation=organisation, minute__gte=since)
    if group:
        qs = qs.filter(group_id=group)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("minute", "group_id", "topic", "partition")


def lag_current(
    *, organisation, as_of, group: str | None = None, topic: str | None = None
) -> QuerySet[LiveLagMinute]:
    """Each group and topic in the last sample (its minute), the lag now."""
    qs = LiveLagMinute.objects.filter(organisation=organisation, sampled_at=as_of)
    if group:
        qs = qs.filter(group_id=group)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("group_id", "topic")


def throughput_minutes(
    *, organisation, since, topic: str | None = None
) -> QuerySet[LiveThroughputMinute]:
    qs = LiveThroughputMinute.objects.filter(organisation=organisation, minute__gte=since)
    if topic:
        qs = qs.filter(topic=topic)
    return qs.order_by("minute", "topic")


THROUGHPUT_SUMS = ("records_in", "bytes_in", "records_out", "bytes_out")


def throughput_totals(*, organisation, since, topic: str | None = None) -> dict[str, dict]:
    """``{topic: sums}`` over the minutes since ``since`` (topics with a row)."""
    qs = throughput_minutes(organisation=organisation, since=since, topic=topic)
    return {
        r["topic"]: {c: r[c] for c in THROUGHPUT_SUMS}
        for r in qs.order_by().values("topic").annotate(**{c: Sum(c) for c in THROUGHPUT_SUMS})
    }
