"""Planning on the driver, for batch and streaming reads alike: which partitions the
subscription covers now, what offset a start or end option means for each (ListOffsets on
the leaders), and the offset ranges each Spark task reads.

Offsets travel as ``{(topic, partition): offset}`` maps here and as Kafka's JSON
``{"topic": {"0": 23}}`` in a streaming query's checkpoint (``as_doc``/``from_doc``).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from spark.datasource.broker import BrokerClient, BrokerReadError, PartitionMeta, _path
from spark.datasource.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, Subscription

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark partition: ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    leader: int
    leader_url: str | None

    def meta(self) -> PartitionMeta:
        return PartitionMeta(self.topic, self.partition, self.leader, self.leader_url)


def split_range(
    topic: str, meta: PartitionMeta, start: int, end: int, max_records: int
) -> list[OffsetRange]:
    """``[start, end)`` in pieces of at most ``max_records`` offsets (none when empty)."""
    if end <= start:
        return []
    step = max(1, max_records)
    return [
        OffsetRange(topic, meta.partition, s, min(s + step, end), meta.leader, meta.leader_url)
        for s in range(start, end, step)
    ]


def plan_ranges(
    metas: dict[TopicPartition, PartitionMeta],
    start: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
    max_records: int,
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """The Spark partitions for ``[start, end)`` of every partition in ``end``: split every
    ``max_records`` offsets and, when ``min_partitions`` asks for more tasks than that gives,
    each range into pieces in proportion to its share of all offsets (as Kafka's source)."""
    spans = {tp: (start.get(tp, 0), e) for tp, e in end.items() if e > start.get(tp, 0)}
    total = sum(e - s for s, e in spans.values())
    ranges: list[OffsetRange] = []
    for tp in sorted(spans):
        s, e = spans[tp]
        step = max_records
        if min_partitions and total and min_partitions > len(spans):
            pieces = max(1, math.ceil((e - s) / total * min_partitions))
            step = min(step, math.ceil((e - s) / pieces))
        ranges += split_range(tp[0], metas[tp], s, e, step)
    return ranges


def as_doc(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Kafka's JSON offsets, topics and partitions in order (Spark compares offsets as text)."""
    doc: dict[str, dict[str, int]] = {}
    for t, p in sorted(offsets):
        doc.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return doc


def from_doc(doc: dict) -> dict[TopicPartition, int]:
    return {(str(t), int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


def client_for(opts: SourceOptions) -> BrokerClient:
    """A client with the options' credential (and ``kafkaConsumer.pollTimeoutMs``)."""
    kw = {} if opts.poll_timeout_s is None else {"timeout_s": opts.poll_timeout_s}
    return BrokerClient(opts.bootstrap, opts.api_key, cluster_secret=opts.cluster_secret, **kw)


def _metas(doc: dict) -> dict[TopicPartition, PartitionMeta]:
    urls = {int(b["id"]): b["url"] for b in doc.get("brokers", [])}
    out = {}
    for t in doc.get("topics", []):
        for p in t["partitions"]:
            leader = int(p["leader"])
            out[(t["name"], int(p["partition"]))] = PartitionMeta(
                t["name"], int(p["partition"]), leader, urls.get(leader)
            )
    return out


def subscribed(client: BrokerClient, sub: Subscription) -> dict[TopicPartition, PartitionMeta]:
    """The partitions the subscription covers in the current metadata (one request).
    ``subscribe`` and ``assign`` name topics that must exist; ``subscribePattern`` matches the
    whole name (as Java's ``Pattern.matches``) of every topic the key sees except the
    internal ``__`` ones, and may match none yet."""
    every = _metas(client.metadata())
    if sub.kind == "subscribePattern":
        rx = re.compile(sub.pattern)
        return {
            tp: m for tp, m in every.items() if not tp[0].startswith("__") and rx.fullmatch(tp[0])
        }
    known_topics = {t for t, _ in every}
    wanted = sub.topics if sub.kind == "subscribe" else tuple(t for t, _ in sub.assignment)
    missing = sorted(set(wanted) - known_topics)
    if missing:
        raise BrokerReadError(
            f"topic(s) {', '.join(map(repr, missing))} are not in the cluster metadata this "
            "key can see",
            "UNKNOWN_TOPIC_OR_PARTITION",
        )
    if sub.kind == "subscribe":
        return {tp: m for tp, m in every.items() if tp[0] in wanted}
    absent = [f"{t}-{p}" for t, p in sub.assignment if (t, p) not in every]
    if absent:
        raise BrokerReadError(
            f"assigned partition(s) {', '.join(absent)} do not exist", "UNKNOWN_TOPIC_OR_PARTITION"
        )
    return {tp: every[tp] for tp in sub.assignment}


def list_offset(
    client: BrokerClient, meta: PartitionMeta, spec: str | int, opts: SourceOptions
) -> tuple[int, int]:
    """ListOffsets on the leader: ``(offset, timestamp)``; for a timestamp with no record at
    or after it, ``(high watermark, -1)``. Retried ``fetchOffset.numRetries`` times."""
    path = _path(meta.topic, meta.partition, f"offsets?timestamp={spec}")
    for attempt in range(opts.fetch_offset_retries + 1):
        try:
            doc = client.conn(client._leader_url(meta)).get_json(path)
            return int(doc["offset"]), int(doc.get("timestamp", -1))
        except BrokerReadError:
            if attempt >= opts.fetch_offset_retries:
                raise
            time.sleep(opts.fetch_offset_retry_ms / 1000)
    raise AssertionError("unreachable")


def resolve(
    client: BrokerClient,
    metas: dict[TopicPartition, PartitionMeta],
    spec: OffsetSpec,
    opts: SourceOptions,
    *,
    ending: bool,
) -> dict[TopicPartition, int]:
    """Every partition's offset for a start or end option. A timestamp resolves to the first
    offset stamped at or after it (batch granularity, as ListOffsets); when there is none,
    an end is the high watermark and a start follows ``startingOffsetsByTimestampStrategy``
    (``error``, Kafka's default, or ``latest``)."""
    out = {}
    for tp, meta in sorted(metas.items()):
        ts = spec.timestamp_for(*tp)
        if spec.by_timestamp and ts is None:
            raise BrokerReadError(
                f"{'ending' if ending else 'starting'}OffsetsByTimestamp gives no timestamp "
                f"for {tp[0]}-{tp[1]}; name every partition of the subscription",
                "INVALID_REQUEST",
            )
        if ts is not None:
            offset, found = list_offset(client, meta, ts, opts)
            if found < 0 and not ending and opts.by_timestamp_strategy == "error":
                raise BrokerReadError(
                    f"{tp[0]}-{tp[1]} has no record stamped at or after {ts}; set "
                    "startingOffsetsByTimestampStrategy=latest to start at the end instead",
                    "OFFSET_NOT_AVAILABLE",
                )
            out[tp] = offset
            continue
        value = spec.offset_for(*tp)
        if value == EARLIEST:
            out[tp] = list_offset(client, meta, "earliest", opts)[0]
        elif value == LATEST:
            out[tp] = list_offset(client, meta, "latest", opts)[0]
        else:
            out[tp] = value
    return out


def latest(client: BrokerClient, metas: dict[TopicPartition, PartitionMeta], opts) -> dict:
    """Every partition's high watermark (what a consumer may read up to)."""
    return {tp: list_offset(client, meta, "latest", opts)[0] for tp, meta in sorted(metas.items())}
