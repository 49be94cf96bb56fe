"""The Brokers page's facts: what each broker says of itself (``GET /sluice/v1/broker``, read
with the operators' credential) beside the control plane's partition table.

Cluster-level facts are for every member of every organisation: a broker's version, uptime,
Kafka listener, its log directory's disk, its partition, leader and under-replicated counts
and its non-secret settings. None of them is another tenant's data. Names of under-replicated
partitions are the caller's organisation's only; the brokers' per-tenant byte counts stay
here (the quotas page uses its own organisation's).

The brokers are asked at once under one deadline (``INFO_TIMEOUT_S``), as the traffic route
does: a stalled broker is named, the others answer. A broker the control plane thinks down
is not asked.
"""

from __future__ import annotations

import functools
from collections import Counter

from django.conf import settings

from backend.cluster import partitions as cluster_partitions
from backend.cluster.models import PartitionAssignment
from backend.console import brokers
from brokernodes import blocking_client

INFO_TIMEOUT_S = 2.0
MAX_ASKERS = 8


def broker_description(url: str, *, timeout_s: float = INFO_TIMEOUT_S) -> dict:
    return brokers.operator_call(f"{url}/sluice/v1/broker", timeout_s=timeout_s)


def describe_live(urls: dict[int, str]) -> tuple[dict[int, dict], dict[int, str]]:
    """``({broker_id: its description}, {broker_id: why it could not be read})``."""
    if not settings.SLUICE_CLUSTER_SECRET:
        reason = "the control plane has no SLUICE_CLUSTER_SECRET to ask brokers with"
        return {}, dict.fromkeys(urls, reason)
    answers, failures = blocking_client.ask_every(
        urls,
        functools.partial(broker_description, timeout_s=INFO_TIMEOUT_S),
        deadline_s=INFO_TIMEOUT_S,
        max_askers=MAX_ASKERS,
    )
    errors = {bid: str(getattr(e, "message", None) or e) for bid, e in failures.items()}
    for bid, doc in list(answers.items()):
        if not isinstance(doc, dict):
            errors[bid] = "the broker's answer was not a JSON object"
            del answers[bid]
    return answers, errors


def partition_counts(organisation) -> tuple[dict[int, dict], dict[int, list[dict]]]:
    """Per broker, from the controller's table: replicas assigned, partitions led, led ones
    under-replicated, and hosted ones whose ISR it is missing from (every tenant's, as
    counts); and the organisation's own under-replicated partitions it leads, by name."""
    counts: dict[int, Counter] = {}
    mine: dict[int, list[dict]] = {}
    rows = PartitionAssignment.objects.select_related("topic").only(
        "partition",
        "replicas",
        "leader",
        "isr",
        "adding_replicas",
        "topic__name",
        "topic__organisation_id",
    )
    for a in rows:
        under = cluster_partitions.under_replicated(a)
        adding = set(a.adding_replicas or ())
        for r in a.replicas:
            c = counts.setdefault(r, Counter())
            c["partitions"] += 1
            if r not in a.isr and r not in adding:
                c["out_of_isr"] += 1
        if a.leader >= 0:
            c = counts.setdefault(a.leader, Counter())
            c["leaders"] += 1
            if under:
                c["under_replicated"] += 1
                if a.topic.organisation_id == organisation.id:
                    mine.setdefault(a.leader, []).append(
                        {"topic": a.topic.name, "partition": a.partition}
                    )
    keys = ("partitions", "leaders", "under_replicated", "out_of_isr")
    return {b: {k: c[k] for k in keys} for b, c in counts.items()}, mine


def public(doc: dict) -> dict:
    """What every member may see of a broker's description (no per-tenant figures)."""
    return {
        "version": str(doc.get("version", "")),
        "started_at_ms": doc.get("started_at_ms"),
        "uptime_s": doc.get("uptime_s"),
        "log_dirs": [
            {
                "path": d.get("path", ""),
                "log_bytes": d.get("log_bytes"),
                "free_bytes": d.get("free_bytes"),
                "total_bytes": d.get("total_bytes"),
            }
            for d in doc.get("log_dirs") or []
        ],
        "hosted_partitions": doc.get("partitions"),
        "configs": dict(doc.get("configs") or {}),
    }
