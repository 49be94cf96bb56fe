"""Writes of the live analytics: the sink the live job (``spark.jobs.live``) hands its minute
rows to (``manage.py analytics_live``). Rows are upserted on their key (a micro-batch that
Spark runs again after a restart writes the same values), rows older than the retention
window are trimmed, and ``LiveStream`` says from when to when each series is measured.
Rows name organisations by id (the brokers' tenant); rows of unknown organisations (a deleted
tenant, or none: a group outside the control plane) are dropped."""

from __future__ import annotations

import os
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from backend.analytics.models import (
    LiveLagMinute,
    LiveLagPartitionMinute,
    LiveStream,
    LiveThroughputMinute,
)
from backend.analytics.runner import utc
from backend.analytics.services import _orgs, _upsert

TRIM_EVERY_S = 60.0


def retention() -> timedelta:
    """How long minute rows are kept: ``SLUICE_ANALYTICS_LIVE_RETENTION_H`` (24 h)."""
    hours = getattr(settings, "SLUICE_ANALYTICS_LIVE_RETENTION_H", None)
    if hours is None:
        hours = os.environ.get("SLUICE_ANALYTICS_LIVE_RETENTION_H", "24")
    return timedelta(hours=float(hours))


def _stream(name: str, *, measured_from, as_of, keep_earlier: bool, source="spark") -> None:
    """Record how far ``name`` is measured and by whom (``source``: the live job, or the
    control plane's ``live_sampler``); ``keep_earlier``: an existing, still retained
    ``measured_from`` stays: lag samples accumulate across restarts."""
    s = LiveStream.objects.select_for_update().filter(name=name).first()
    horizon = timezone.now() - retention()
    if s is None:
        LiveStream.objects.create(
            name=name, measured_from=measured_from, as_of=as_of, source=source
        )
        return
    if not keep_earlier or s.measured_from < horizon:
        s.measured_from = measured_from
    s.as_of = max(s.as_of, as_of)
    s.source = source
    s.save()


def _fresh_connection() -> None:
    """A long-running process outside requests: drop a connection past its age or broken
    (as Django does around each request), never one inside a transaction."""
    if not connection.in_atomic_block:
        close_old_connections()


class ControlPlaneSink:
    """``spark.jobs.live.LiveSink`` over the control plane's tables."""

    def __init__(self) -> None:
        self._trimmed = 0.0

    def lag(self, partitions: list[dict], groups: list[dict], *, sampled_ms: int) -> None:
        _fresh_connection()
        orgs = _orgs(groups)
        parts = [
            LiveLagPartitionMinute(
                organisation=orgs[r["tenant"]],
                group_id=r["group"],
                topic=r["topic"],
                partition=r["partition"],
                minute=utc(r["minute_ms"]),
                sampled_at=utc(r["sampled_ms"]),
                committed_offset=r["committed_offset"],
                log_end_offset=r["log_end_offset"],
                offset_lag=r["offset_lag"],
            )
            for r in partitions
            if r["tenant"] in orgs
        ]
        sums = [
            LiveLagMinute(
                organisation=orgs[r["tenant"]],
                group_id=r["group"],
                topic=r["topic"],
                minute=utc(r["minute_ms"]),
                sampled_at=utc(r["sampled_ms"]),
                offset_lag=r["offset_lag"],
                partitions=r["partitions"],
                measured=r["measured"],
                topic_partitions=r["topic_partitions"],
            )
            for r in groups
            if r["tenant"] in orgs
        ]
        sampled = utc(sampled_ms)
        with transaction.atomic():
            _upsert(
                LiveLagPartitionMinute,
                parts,
                ["organisation", "group_id", "topic", "partition", "minute"],
                ["sampled_at", "committed_offset", "log_end_offset", "offset_lag"],
            )
            _upsert(
                LiveLagMinute,
                sums,
                ["organisation", "group_id", "topic", "minute"],
                ["sampled_at", "offset_lag", "partitions", "measured", "topic_partitions"],
            )
            minute = utc(sampled_ms - sampled_ms % 60_000)  # rows are per minute
            _stream("lag", measured_from=minute, as_of=sampled, keep_earlier=True)
        self._trim()

    def throughput(self, rows: list[dict], *, measured_from_ms: int, as_of_ms: int) -> None:
        _fresh_connection()
        orgs = _orgs(rows)
        objs = [
            LiveThroughputMinute(
                organisation=orgs[r["tenant"]],
                topic=r["topic"],
                minute=utc(r["minute_ms"]),
                records_in=r["records_in"],
                bytes_in=r["bytes_in"],
                records_out=r["records_out"],
                bytes_out=r["bytes_out"],
            )
            for r in rows
            if r["tenant"] in orgs
        ]
        with transaction.atomic():
            _upsert(
                LiveThroughputMinute,
                objs,
                ["organisation", "topic", "minute"],
                ["records_in", "bytes_in", "records_out", "bytes_out"],
            )
            _stream(
                "throughput",
                measured_from=utc(measured_from_ms),
                as_of=utc(as_of_ms),
                keep_earlier=False,
            )
        self._trim()

    def _trim(self) -> None:
        now = timezone.now()
        if now.timestamp() - self._trimmed < TRIM_EVERY_S:
            return
        self._trimmed = now.timestamp()
        trim(now=now)


def trim(*, now=None) -> int:
    """Delete minute rows older than ``retention()``; returns how many."""
    cutoff = (now or timezone.now()) - retention()
    n = 0
    for model in (LiveLagPartitionMinute, LiveLagMinute, LiveThroughputMinute):
        n += model.objects.filter(minute__lt=cutoff).delete()[0]
    return n
