"""Reads the console needs beyond the REST resources: partition state with offsets and broker
health (the message browser's scan is ``backend.console.browse``). Each takes the
organisation; broker calls use that organisation's console key, so a broker only ever answers
about this tenant's topics."""

from __future__ import annotations

import time

from django.utils import timezone

from backend.cluster import partitions as cluster_partitions
from backend.cluster.models import Broker, PartitionAssignment
from backend.cluster.selectors import live_broker_ids
from backend.console import broker_info, brokers
from backend.console.credentials import console_token
from backend.core.exceptions import ApplicationError
from backend.topics.models import Topic


def broker_list(*, organisation) -> list[dict]:
    """The brokers (a shared platform resource): registry and liveness, partition counts from
    the controller's table, and what each live broker says of itself (``broker_info``);
    ``info`` is null with ``info_error`` saying why (down, unreachable) rather than zeros.
    Of other tenants' partitions only counts appear; ``leader_partitions`` and the
    under-replicated names are this organisation's."""
    live = set(live_broker_ids())
    leaders: dict[int, int] = {}
    mine = PartitionAssignment.objects.filter(topic__organisation=organisation)
    for leader in mine.values_list("leader", flat=True):
        leaders[leader] = leaders.get(leader, 0) + 1
    registry = list(Broker.objects.order_by("broker_id"))
    counts, my_under = broker_info.partition_counts(organisation)
    urls = {b.broker_id: b.url.rstrip("/") for b in registry if b.broker_id in live}
    infos, errors = broker_info.describe_live(urls)
    zero = {"partitions": 0, "leaders": 0, "under_replicated": 0, "out_of_isr": 0}
    out = []
    for b in registry:
        info = infos.get(b.broker_id)
        if b.broker_id not in live:
            error = "down: no heartbeat within the session timeout"
        elif info is None:
            error = f"unreachable: {errors.get(b.broker_id, 'no answer')}"
        else:
            error = None
        out.append(
            {
                "broker_id": b.broker_id,
                "url": b.url,
                "kafka": b.kafka or None,
                "live": b.broker_id in live,
                "last_heartbeat_at": b.last_heartbeat_at,
                "registered_at": b.registered_at,
                "metadata_version": b.metadata_version,
                "leader_partitions": leaders.get(b.broker_id, 0),
                **counts.get(b.broker_id, zero),
                "your_under_replicated": my_under.get(b.broker_id, []),
                "info": broker_info.public(info) if info is not None else None,
                "info_error": error,
            }
        )
    return out


def partition_states(*, organisation, topic_name: str | None = None) -> dict:
    """Every partition of the organisation's topics (or one topic): assignment from the
    control plane, offsets from the leaders' metadata answers."""
    topics = Topic.objects.filter(organisation=organisation)
    if topic_name is not None:
        topics = topics.filter(name=topic_name)
    topics = list(topics.order_by("name"))
    live = set(live_broker_ids())
    by_topic = {t.pk: [] for t in topics}
    for a in PartitionAssignment.objects.filter(topic__in=topics).order_by("partition"):
        by_topic[a.topic_id].append(a)
    offsets: dict[tuple[str, int], dict] = {}
    errors: list[str] = []
    if topics and live:
        token = console_token(organisation)
        urls = brokers.broker_urls()
        for bid in sorted(live):
            if bid not in urls:
                continue
            try:
                meta = brokers.metadata(urls[bid], token)
            except ApplicationError as e:
                errors.append(f"broker {bid}: {e.message}")
                continue
            for t in meta.get("topics", []):
                for p in t.get("partitions", []):
                    if p.get("leader") == bid and p.get("log_end_offset") is not None:
                        offsets[(t["name"], int(p["partition"]))] = p
    out = []
    now_ms = int(time.time() * 1000)
    for t in topics:
        parts = []
        for a in by_topic[t.pk]:
            o = offsets.get((t.name, a.partition), {})
            parts.append(
                {
                    "partition": a.partition,
                    "leader": a.leader,
                    "leader_epoch": a.leader_epoch,
                    "replicas": list(a.replicas),
                    "isr": list(a.isr),
                    # the controller's one definition (Kafka's OfflinePartitions and
                    # UnderReplicatedPartitions), so the console and operators agree
                    "offline": cluster_partitions.offline(a),
                    "under_replicated": cluster_partitions.under_replicated(a),
                    "log_start_offset": o.get("log_start_offset"),
                    "log_end_offset": o.get("log_end_offset"),
                    "high_watermark": o.get("high_watermark"),
                    "last_stable_offset": o.get("last_stable_offset"),
                    "open_transactions": open_transactions(o, now_ms),
                }
            )
        out.append({"name": t.name, "partitions": parts})
    return {"ts": timezone.now(), "topics": out, "errors": errors}


def open_transactions(leader_partition: dict, now_ms: int) -> list[dict]:
    """The leader's open transactions of a partition, each with how long it has been open
    (from its first batch's timestamp: the producer's clock, so never below zero)."""
    out = []
    for t in leader_partition.get("open_transactions") or []:
        started = t.get("started_ms")
        out.append({**t, "open_ms": None if started is None else max(0, now_ms - started)})
    return out
