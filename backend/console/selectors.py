"""Reads the console needs beyond the REST resources: partition state with offsets, broker
health, and the message browser's scan. Each takes the organisation; broker calls use that
organisation's console key, so a broker only ever answers about this tenant's topics."""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass, field

from django.utils import timezone

from backend.cluster import partitions as cluster_partitions
from backend.cluster.models import Broker, PartitionAssignment
from backend.cluster.selectors import live_broker_ids
from backend.console import broker_info, brokers
from backend.console.credentials import console_token
from backend.console.filters import JsonPath, as_text, header_matches, json_path_matches
from backend.core.exceptions import ApplicationError
from backend.topics.models import Topic
from brokernodes.client.partitioner import partition_for_key

PAGE_RECORDS = 500
SCAN_BUDGET = 20_000  # records read per browse call at most; the answer says where to go on


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
                }
            )
        out.append({"name": t.name, "partitions": parts})
    return {"ts": timezone.now(), "topics": out, "errors": errors}


@dataclass
class BrowseQuery:
    partition: int | None = None
    start: str = "latest"  # earliest | latest | offset | timestamp
    offset: int | None = None
    timestamp: int | None = None  # epoch ms
    limit: int = 50
    key: str | None = None
    header_name: str | None = None
    header_value: str | None = None
    json_path: JsonPath | None = None
    json_value: str | None = None
    filters: list[str] = field(default_factory=list)


def _key_text(record: dict) -> str | None:
    key, fmt = record.get("key"), record.get("key_format")
    if key is None:
        return None
    if fmt == "base64":
        try:
            return base64.b64decode(key).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return as_text(key)


def _keep(record: dict, q: BrowseQuery) -> bool:
    if q.key is not None and _key_text(record) != q.key:
        return False
    if q.header_name and not header_matches(record.get("headers"), q.header_name, q.header_value):
        return False
    return q.json_path is None or json_path_matches(
        q.json_path, record.get("value"), record.get("value_format", ""), q.json_value
    )


def browse(*, organisation, topic: Topic, q: BrowseQuery) -> dict:
    """Scan one partition forward from the chosen start and keep the records that pass the
    filters, up to ``limit`` (``latest`` starts ``limit`` records before the end). With a key,
    the partition is the key's (murmur2, as Kafka's default partitioner) and only it is read."""
    partition = q.partition if q.partition is not None else 0
    if q.key is not None:
        partition = partition_for_key(q.key.encode("utf-8"), topic.partitions)
    if not 0 <= partition < topic.partitions:
        raise ApplicationError(
            f"{topic.name!r} has partitions 0 to {topic.partitions - 1}",
            {"partition": ["no such partition"]},
        )
    token = console_token(organisation)
    try:
        url = brokers.leader_url(topic, partition)
    except brokers.BrokerError as e:
        if e.error_code != "LEADER_NOT_AVAILABLE":
            raise
        return {**_empty(topic.name, partition, q), "unavailable": e.message}
    earliest = brokers.list_offset(url, token, topic.name, partition, "earliest")
    latest = brokers.list_offset(url, token, topic.name, partition, "latest")
    if q.start == "earliest":
        position = earliest
    elif q.start == "offset":
        position = min(max(q.offset or 0, earliest), latest)
    elif q.start == "timestamp":
        position = brokers.list_offset(url, token, topic.name, partition, str(q.timestamp))
    else:
        position = max(earliest, latest - q.limit)
    kept: list[dict] = []
    scanned = 0
    started = time.monotonic()
    high_watermark = latest
    while len(kept) < q.limit and position < high_watermark and scanned < SCAN_BUDGET:
        page = brokers.fetch_records(url, token, topic.name, partition, position, PAGE_RECORDS)
        high_watermark = int(page.get("high_watermark", high_watermark))
        records = page.get("records") or []
        for r in records:
            scanned += 1
            if _keep(r, q):
                kept.append({"partition": partition, **r})
                if len(kept) >= q.limit:
                    position = int(r["offset"]) + 1
                    break
        else:
            position = int(page.get("next_offset", position))
            if not records:
                break
        if time.monotonic() - started > 8:
            break
    return {
        "topic": topic.name,
        "partition": partition,
        "key_partition": q.key is not None,
        "log_start_offset": earliest,
        "high_watermark": high_watermark,
        "records": kept,
        "scanned": scanned,
        "next_offset": position,
        "reached_end": position >= high_watermark,
        "unavailable": None,
    }


def _empty(topic: str, partition: int, q: BrowseQuery) -> dict:
    return {
        "topic": topic,
        "partition": partition,
        "key_partition": q.key is not None,
        "log_start_offset": 0,
        "high_watermark": 0,
        "records": [],
        "scanned": 0,
        "next_offset": 0,
        "reached_end": True,
    }
