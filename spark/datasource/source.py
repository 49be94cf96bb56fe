"""``spark.read.format("sluice")``: a batch DataSource over the broker fetch API.

Like Spark's Kafka source, the driver resolves every topic-partition's offset range (from
``startingOffsets``/``endingOffsets`` or ``startingTimestamp``/``endingTimestamp`` through
ListOffsets on the leaders) and plans one Spark partition per range; a range longer than
``maxRecordsPerPartition`` offsets is split. Executors fetch raw RecordBatch v2 batches from
the partition's leader with the API key and decode them with ``brokernodes.records``.

Options (names as Spark's Kafka source where it has one):

========================  ==================================================================
``bootstrap``             broker URL(s), comma-separated (required)
``apiKey``                ``<key_id>.<secret>`` (or ``clusterSecret``: the operators'
                          read-only credential, which sees every tenant's topics by id)
``topic``                 topic name(s), comma-separated (required)
``startingOffsets``       ``earliest`` (default), ``latest`` or ``{"t": {"0": 12}}``
                          (-2 earliest, -1 latest per partition)
``endingOffsets``         ``latest`` (default: the high watermark at planning) or JSON
``startingTimestamp``     epoch ms: start at the first offset stamped at or after it
``endingTimestamp``       epoch ms: stop before the first offset stamped at or after it
``maxRecordsPerPartition``  split ranges longer than this many offsets (default 1,000,000)
``failOnDataLoss``        ``true`` (default): fail when retention removed planned offsets
``tenant``                the value of the ``tenant`` column (default null)
``decode``                ``raw`` (Kafka columns), ``consumer_offsets`` or ``usage``; the
                          default follows the topic name (``__consumer_offsets``, ``__usage``)
``includeUnreadable``     ``true``: a batch that cannot be decoded becomes one row with a
                          non-null ``unreadable`` column (its reason; ``offset`` its base
                          offset, the other data columns null); default ``false``: it is
                          skipped and logged (raw decode only; internal topics always skip)
========================  ==================================================================
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from spark.datasource.broker import BrokerClient, PartitionMeta, read_range
from spark.datasource.internal import CONSUMER_OFFSETS, USAGE, decode_offsets_row, decode_usage_row
from spark.datasource.validity import UnreadableBatch

RAW_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>, tenant string"
)
CONSUMER_OFFSETS_SCHEMA = (
    "group string, topic string, partition int, committed_offset long, leader_epoch int, "
    "metadata string, commit_timestamp timestamp, offset long, timestamp timestamp, "
    "tenant string"
)
USAGE_SCHEMA = (
    "tenant string, principal string, topic string, window_start timestamp, "
    "window_end timestamp, broker_id int, bytes_in long, bytes_out long, records_in long, "
    "records_out long, requests long, throttle_ms long, offset long"
)
UNREADABLE_COLUMN = "unreadable string"
SCHEMAS = {"raw": RAW_SCHEMA, "consumer_offsets": CONSUMER_OFFSETS_SCHEMA, "usage": USAGE_SCHEMA}
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
EARLIEST, LATEST = -2, -1

logger = logging.getLogger("sluice.spark.source")


class SluiceOptionError(ValueError):
    """A missing or malformed option; the message names it."""


def _ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


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


def parse_offsets(spec: str | None, default: int) -> int | dict[str, dict[int, int]]:
    """``earliest``/``latest`` or Spark's JSON ``{"topic": {"partition": offset}}``."""
    if spec is None or spec == "":
        return default
    s = spec.strip()
    if s == "earliest":
        return EARLIEST
    if s == "latest":
        return LATEST
    try:
        doc = json.loads(s)
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in doc.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise SluiceOptionError(
            f"offsets {spec!r}: use 'earliest', 'latest' or JSON like "
            '{"orders": {"0": 42, "1": -2}}'
        ) from e


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() in ("1", "true", "yes")


class SluiceDataSource(DataSource):
    """The ``sluice`` format."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _decode(self) -> str:
        decode = self.options.get("decode")
        if decode:
            if decode not in SCHEMAS:
                raise SluiceOptionError(f"decode must be one of {sorted(SCHEMAS)}, not {decode!r}")
            return decode
        topic = self.options.get("topic", "")
        return {CONSUMER_OFFSETS: "consumer_offsets", USAGE: "usage"}.get(topic, "raw")

    def _include_unreadable(self) -> bool:
        options = {k.lower(): v for k, v in self.options.items()}
        return self._decode() == "raw" and _bool(options.get("includeunreadable"), False)

    def schema(self) -> str:
        schema = SCHEMAS[self._decode()]
        return f"{schema}, {UNREADABLE_COLUMN}" if self._include_unreadable() else schema

    def reader(self, schema) -> DataSourceReader:
        return SluiceReader({k.lower(): v for k, v in self.options.items()}, self._decode())


class SluiceReader(DataSourceReader):
    def __init__(self, options: dict[str, str], decode: str) -> None:
        """``options`` with lower-case names (Spark's options are case-insensitive)."""
        if not options.get("apikey") and not options.get("clustersecret"):
            raise SluiceOptionError("format('sluice') needs option 'apiKey' or 'clusterSecret'")
        for required in ("bootstrap", "topic"):
            if not options.get(required):
                raise SluiceOptionError(f"option {required!r} is required by format('sluice')")
        self.options = options
        self.decode = decode
        self.topics = [t.strip() for t in options["topic"].split(",") if t.strip()]
        self.max_records = int(
            options.get("maxrecordsperpartition", DEFAULT_MAX_RECORDS_PER_PARTITION)
        )
        self.fail_on_data_loss = _bool(options.get("failondataloss"), True)
        self.tenant = options.get("tenant") or None
        self.include_unreadable = decode == "raw" and _bool(options.get("includeunreadable"), False)

    def _client(self) -> BrokerClient:
        return BrokerClient(
            self.options["bootstrap"],
            self.options.get("apikey") or None,
            cluster_secret=self.options.get("clustersecret") or None,
        )

    def partitions(self) -> list[OffsetRange]:
        o = self.options
        starting = parse_offsets(o.get("startingoffsets"), EARLIEST)
        ending = parse_offsets(o.get("endingoffsets"), LATEST)
        start_ts = o.get("startingtimestamp")
        end_ts = o.get("endingtimestamp")
        client = self._client()
        ranges: list[OffsetRange] = []
        try:
            for topic in self.topics:
                for meta in client.partitions(topic):

                    def resolve(spec, ts, default, meta=meta, topic=topic) -> int:
                        if ts is not None:
                            return client.list_offset(meta, int(ts))
                        value = (
                            spec.get(topic, {}).get(meta.partition, default)
                            if isinstance(spec, dict)
                            else spec
                        )
                        if value == EARLIEST:
                            return client.list_offset(meta, "earliest")
                        if value == LATEST:
                            return client.list_offset(meta, "latest")
                        return int(value)

                    start = resolve(starting, start_ts, EARLIEST)
                    end = resolve(ending, end_ts, LATEST)
                    ranges += split_range(topic, meta, start, end, self.max_records)
        finally:
            client.close()
        return ranges

    def read(self, partition: OffsetRange):
        if not isinstance(partition, OffsetRange):
            return  # nothing planned: Spark still runs one task with a bare InputPartition
        client = self._client()

        def refresh(meta: PartitionMeta) -> PartitionMeta:
            for m in client.partitions(meta.topic):
                if m.partition == meta.partition:
                    return m
            return meta

        tenant = self.tenant
        topic = partition.topic
        p = partition.partition
        try:
            records = read_range(
                client,
                partition.meta(),
                partition.start,
                partition.end,
                fail_on_data_loss=self.fail_on_data_loss,
                refresh_leader=refresh,
            )
            if self.decode != "raw":
                internal = self.decode == "consumer_offsets"
                for r, _ in records:
                    if isinstance(r, UnreadableBatch):
                        _log_skipped(topic, p, r, tenant)
                        continue
                    row = decode_offsets_row(r, tenant) if internal else decode_usage_row(r)
                    if row is not None:
                        yield row
                return
            marked = self.include_unreadable
            for r, tstype in records:
                if isinstance(r, UnreadableBatch):
                    if marked:
                        yield (
                            None,
                            None,
                            topic,
                            p,
                            r.base_offset,
                            None,
                            None,
                            [],
                            tenant,
                            r.reason,
                        )
                    else:
                        _log_skipped(topic, p, r, tenant)
                    continue
                row = (
                    r.key,
                    r.value,
                    topic,
                    p,
                    r.offset,
                    _ms(r.timestamp),
                    tstype,
                    [(k, v) for k, v in r.headers],
                    tenant,
                )
                yield (*row, None) if marked else row
        finally:
            client.close()


def _log_skipped(topic: str, partition: int, bad: UnreadableBatch, tenant: str | None) -> None:
    logger.warning(
        "skipped an unreadable batch of %s-%s (tenant %s), offsets %d..%d: %s",
        topic,
        partition,
        tenant or "-",
        bad.base_offset,
        bad.last_offset,
        bad.reason,
    )


def register(spark) -> None:
    """Make ``format("sluice")`` available in this session."""
    spark.dataSource.register(SluiceDataSource)
