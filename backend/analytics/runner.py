"""Runs one analytics job: what to read (from the control plane's tables), the Spark job,
and the rows to store. The Spark side (``spark.jobs``) knows nothing of Django.

The jobs read with the operators' cluster credential (``Authorization: Cluster <secret>``,
read-only on the brokers), which sees every tenant's topics by topic id; each ``TopicRef``
carries the organisation id as tenant and the topic's name for the reports.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from backend.analytics.models import StorageSample


def _internal():
    from backend.cluster.internal_topics import INTERNAL_ORGANISATION_SLUG

    return INTERNAL_ORGANISATION_SLUG


def bootstrap() -> str:
    if settings.SLUICE_ANALYTICS_BOOTSTRAP:
        return settings.SLUICE_ANALYTICS_BOOTSTRAP
    from backend.cluster.selectors import live_broker_urls

    return ",".join(live_broker_urls().values())


def tenant_topics(*, compacted: bool | None = None, organisation_id=None):
    """Every tenant topic as a ``TopicRef`` (internal topics excluded), or one
    organisation's."""
    from backend.topics.models import Topic
    from spark.jobs.common import TopicRef

    qs = Topic.objects.exclude(organisation__slug=_internal()).order_by("created_at")
    if organisation_id is not None:
        qs = qs.filter(organisation_id=organisation_id)
    refs = []
    for t in qs:
        policy = str((t.configs or {}).get("cleanup.policy", "delete"))
        if compacted is not None and ("compact" in policy) != compacted:
            continue
        refs.append(TopicRef(str(t.topic_id), str(t.organisation_id), t.name))
    return refs


def internal_topic(name: str):
    from backend.topics.models import Topic
    from spark.jobs.common import TopicRef

    t = Topic.objects.filter(organisation__slug=_internal(), name=name).first()
    return None if t is None else TopicRef(str(t.topic_id), "", name)


def _source():
    from spark.jobs.common import Source

    servers = bootstrap()
    if not servers:
        raise RuntimeError("no live broker to read from (and SLUICE_ANALYTICS_BOOTSTRAP unset)")
    if not settings.SLUICE_CLUSTER_SECRET:
        raise RuntimeError("SLUICE_CLUSTER_SECRET is not set: the jobs read with it")
    return Source(servers, cluster_secret=settings.SLUICE_CLUSTER_SECRET)


def _spark():
    from spark.session import get_session

    return get_session(app_name="sluice-analytics")


def tenants_with_topics() -> list[str]:
    """The organisations (ids) that own a tenant topic, oldest topic first."""
    return list(dict.fromkeys(t.tenant for t in tenant_topics()))


def run_job(job: str, *, organisation_id=None) -> dict[str, list[dict]]:
    """Compute one job's results (nothing stored here), over every tenant or over one
    organisation's topics (and its ``__usage`` rows). An empty cluster needs no Spark."""
    org = None if organisation_id is None else str(organisation_id)
    now_ms = int(time.time() * 1000)
    since_ms = now_ms - int(settings.SLUICE_ANALYTICS_LOOKBACK_H * 3_600_000)
    if job == "usage":
        ref = internal_topic("__usage")
        if ref is None:
            return {}
        from spark.jobs import usage

        horizon = timezone.now() - timedelta(hours=settings.SLUICE_ANALYTICS_LOOKBACK_H)
        samples = StorageSample.objects.filter(ts__gte=horizon)
        if org is not None:
            samples = samples.filter(organisation_id=org)
        storage = [(str(s.organisation_id), s.topic, s.ts, s.bytes) for s in samples]
        source = _source()  # before Spark starts: a missing broker fails fast
        return usage.run(_spark(), source, ref, storage=storage, since_ms=since_ms, tenant=org)
    topics = tenant_topics(organisation_id=org)
    if not topics:
        return {}
    source = _source()
    if job == "lag":
        ref = internal_topic("__consumer_offsets")
        if ref is None:
            return {}
        from spark.jobs import lag

        return lag.run(
            _spark(),
            source,
            topics,
            ref,
            now_ms=now_ms,
            since_ms=since_ms,
            min_stop_ms=settings.SLUICE_ANALYTICS_MIN_STOP_MS,
        )
    if job == "throughput":
        from spark.jobs import throughput

        return throughput.run(_spark(), source, topics, since_ms=since_ms)
    if job == "retention":
        from spark.jobs import retention

        return retention.run(
            _spark(),
            source,
            topics,
            now_ms=now_ms,
            compacted=tenant_topics(compacted=True, organisation_id=org),
        )
    raise ValueError(f"unknown job {job!r}")


def utc(ms_or_dt) -> datetime:
    """An aware UTC datetime from epoch ms or a collected Spark timestamp (PySpark hands
    those back naive, in the process's local time)."""
    if isinstance(ms_or_dt, datetime):
        if ms_or_dt.tzinfo is None:
            return datetime.fromtimestamp(ms_or_dt.timestamp(), tz=UTC)
        return ms_or_dt.astimezone(UTC)
    return datetime.fromtimestamp(ms_or_dt / 1000, tz=UTC)
