"""The control plane's sampler of the live series: when the live Spark job is not keeping
them current (no Java, ``SLUICE_ANALYTICS_LIVE=0``, or the job down), Celery beat runs
``sample`` every ``SLUICE_LIVE_SAMPLE_S`` (60) seconds and it stores per-minute throughput
and lag from the brokers' Prometheus ``/metrics`` into the live tables the reports API
serves, so the console's charts have history from ``make up`` on.

- **Throughput**: each broker counts records and bytes in and out per tenant and topic. The
  sampler keeps each broker's last reading (``LiveCounterReading``) and spreads a series'
  growth since then over the minutes between the two readings, in proportion to their
  overlap (a late tick, behind a Spark job on the worker, still lands in the right minutes).
  A counter lower than before means its broker restarted: the new value is what it counted
  since. Growth over more than ``MAX_SPREAD_S`` is not attributed: a gap, not a spike.
- **Lag**: the coordinators' ``sluice_group_lag`` gauges (per ``<tenant>/<group>``, topic and
  partition), summed per group and topic into that minute's ``LiveLagMinute``. Partition
  rows are the live job's only: the gauges carry no committed offset.
- **Authority**: the live job's rows are authoritative (it reads ``__usage`` and the commits
  themselves, exactly once). A series the live job measured less than ``STALE_S`` ago is
  left to it; ``LiveStream.source`` says who measured a series last. The live job upserts
  its minutes over the sampler's when it (re)starts.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from backend.analytics.live_services import _stream, trim
from backend.analytics.models import LiveCounterReading, LiveLagMinute, LiveStream
from backend.analytics.models import LiveThroughputMinute as Tput
from backend.analytics.services import _orgs, _upsert

STALE_S = 180.0
MAX_SPREAD_S = 600.0
METRICS_TIMEOUT_S = 5.0
# counter families in the order of a reading's list and of the throughput columns
COUNTERS = ("sluice_records_in", "sluice_bytes_in", "sluice_records_out", "sluice_bytes_out")
COLUMNS = ("records_in", "bytes_in", "records_out", "bytes_out")
SEP = "/"  # tenant ids are UUIDs: the first / ends one


def interval_s() -> float:
    """Seconds between samples: ``SLUICE_LIVE_SAMPLE_S`` (60; 0 turns the sampler off)."""
    return float(os.environ.get("SLUICE_LIVE_SAMPLE_S", "60"))


def parse_metrics(text: str) -> tuple[dict[str, list[int]], list[tuple]]:
    """One broker's exposition: ``({"<tenant>/<topic>": [records_in, bytes_in,
    records_out, bytes_out]}, [(tenant, group, topic, partition, lag or None)])``. Series
    without a tenant (no control plane) are dropped."""
    counters: dict[str, list[int]] = {}
    lag: list[tuple] = []
    for family in text_string_to_metric_families(text):
        if family.name in COUNTERS:
            col = COUNTERS.index(family.name)
            for s in family.samples:
                tenant = s.labels.get("tenant")
                if not s.name.endswith("_total") or not tenant:
                    continue
                key = f"{tenant}{SEP}{s.labels.get('topic', '')}"
                counters.setdefault(key, [0, 0, 0, 0])[col] += int(s.value)
        elif family.name == "sluice_group_lag":
            for s in family.samples:
                tenant, sep, group = s.labels.get("group", "").partition("/")
                if not sep or not tenant:
                    continue
                value = None if s.value != s.value else int(s.value)  # NaN: not measured
                lag.append((tenant, group, s.labels["topic"], int(s.labels["partition"]), value))
    return counters, lag


def spread(amount: int, t0: float, t1: float) -> dict[int, int]:
    """``amount`` grown between epoch seconds ``t0`` and ``t1``, split over the minutes it
    overlaps in proportion (``{minute start: n}``, whole numbers summing to ``amount``)."""
    if amount == 0 or t1 <= t0:
        return {}
    out: dict[int, int] = {}
    given = 0
    start = int(t0 // 60 * 60)
    while start < t1:
        end = min(start + 60, t1)
        cum = round(amount * (end - t0) / (t1 - t0))
        if cum != given:
            out[start] = cum - given
        given = cum
        start += 60
    return out


def growth(now: list[int], before: list[int] | None) -> list[int]:
    """Counter growth since ``before`` (absent: the series started since; lower: a reset)."""
    if before is None:
        return list(now)
    return [n - b if n >= b else n for n, b in zip(now, before, strict=True)]


def _current_elsewhere(name: str, now: datetime) -> bool:
    """Whether the live job keeps ``name`` current (the sampler then leaves it alone)."""
    s = LiveStream.objects.filter(name=name).first()
    return s is not None and s.source == "spark" and (now - s.as_of).total_seconds() < STALE_S


def _minute(epoch_s: int) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


def store_throughput(readings: dict[int, dict[str, list[int]]], now: datetime) -> int:
    """Add each broker's growth since its last reading to the minutes it covers, keep the
    readings; returns the minute rows written."""
    sums: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    earliest: datetime | None = None
    prev = LiveCounterReading.objects.in_bulk(list(readings))
    for broker_id, counters in readings.items():
        p = prev.get(broker_id)
        if p is None or not 0 < (now - p.read_at).total_seconds() <= MAX_SPREAD_S:
            continue
        earliest = p.read_at if earliest is None else min(earliest, p.read_at)
        t0, t1 = p.read_at.timestamp(), now.timestamp()
        for key, values in counters.items():
            tenant, _, topic = key.partition(SEP)
            for col, amount in enumerate(growth(values, p.counters.get(key))):
                for minute, n in spread(amount, t0, t1).items():
                    sums[(tenant, topic, minute)][col] += n
    for broker_id, counters in readings.items():
        LiveCounterReading.objects.update_or_create(
            broker_id=broker_id, defaults={"read_at": now, "counters": counters}
        )
    if earliest is None:
        return 0
    orgs = _orgs([{"tenant": t} for t, _, _ in sums])
    keys = [(orgs[t], topic, _minute(m)) for t, topic, m in sums if t in orgs]
    existing = {
        (str(r.organisation_id), r.topic, int(r.minute.timestamp())): r
        for r in Tput.objects.filter(
            organisation__in=list(orgs.values()),
            minute__gte=earliest.replace(second=0, microsecond=0),
        )
    }
    objs = []
    for (tenant, topic, m), add in sums.items():
        if tenant not in orgs:
            continue
        old = existing.get((tenant, topic, m))
        base = [getattr(old, c) for c in COLUMNS] if old else [0, 0, 0, 0]
        objs.append(
            Tput(
                organisation=orgs[tenant],
                topic=topic,
                minute=_minute(m),
                **{c: b + a for c, b, a in zip(COLUMNS, base, add, strict=True)},
            )
        )
    _upsert(Tput, objs, ["organisation", "topic", "minute"], list(COLUMNS))
    s = LiveStream.objects.filter(name="throughput").first()
    continuous = s is not None and s.source == "sampler" and s.as_of >= earliest
    _stream(
        "throughput",
        measured_from=earliest,
        as_of=now,
        keep_earlier=continuous,
        source="sampler",
    )
    return len(keys)


def store_lag(samples: list[tuple], now: datetime) -> int:
    """This minute's lag per group and topic from the coordinators' gauges."""
    groups: dict[tuple[str, str, str], list] = {}
    for tenant, group, topic, _partition, lag in samples:
        g = groups.setdefault((tenant, group, topic), [0, 0, 0])  # lag, partitions, measured
        g[1] += 1
        if lag is not None:
            g[0] += lag
            g[2] += 1
    orgs = _orgs([{"tenant": t} for t, _, _ in groups])
    minute = now.replace(second=0, microsecond=0)
    objs = [
        LiveLagMinute(
            organisation=orgs[tenant],
            group_id=group,
            topic=topic,
            minute=minute,
            sampled_at=now,
            offset_lag=lag if measured else None,
            partitions=parts,
            measured=measured,
            topic_partitions=parts,
        )
        for (tenant, group, topic), (lag, parts, measured) in groups.items()
        if tenant in orgs
    ]
    _upsert(
        LiveLagMinute,
        objs,
        ["organisation", "group_id", "topic", "minute"],
        ["sampled_at", "offset_lag", "partitions", "measured", "topic_partitions"],
    )
    s = LiveStream.objects.filter(name="lag").first()
    continuous = (
        s is not None and s.source == "sampler" and (now - s.as_of).total_seconds() <= MAX_SPREAD_S
    )
    _stream("lag", measured_from=minute, as_of=now, keep_earlier=continuous, source="sampler")
    return len(objs)


def sample_texts(texts: dict[int, str], *, now: datetime | None = None) -> dict:
    """Store one sample from the brokers' ``/metrics`` texts (``{broker_id: text}``); what
    was written (or why not) per series."""
    now = now or timezone.now()
    readings: dict[int, dict[str, list[int]]] = {}
    lag: list[tuple] = []
    for broker_id, text in texts.items():
        try:
            counters, rows = parse_metrics(text)
        except ValueError:
            continue  # unreadable: this broker is left out of this sample
        readings[broker_id] = counters
        lag.extend(rows)
    out: dict = {}
    with transaction.atomic():
        if _current_elsewhere("throughput", now):
            out["throughput"] = "live job"
            for broker_id, counters in readings.items():  # resume from here if it stops
                LiveCounterReading.objects.update_or_create(
                    broker_id=broker_id, defaults={"read_at": now, "counters": counters}
                )
        else:
            out["throughput"] = store_throughput(readings, now)
        if _current_elsewhere("lag", now):
            out["lag"] = "live job"
        elif readings:
            out["lag"] = store_lag(lag, now)
    trim(now=now)
    return out


def sample() -> dict:
    """Read every live broker's metrics and store one sample (Celery beat's task)."""
    from backend.cluster.selectors import live_broker_urls
    from backend.console.traffic import read_metrics

    texts, errors = read_metrics(live_broker_urls(), METRICS_TIMEOUT_S)
    return {**sample_texts(texts), "errors": errors}
