"""``spark.read.format("sluice")`` and ``spark.readStream.format("sluice")``: the source over
the broker fetch API, with the options of Spark's Kafka source (``options.py``).

Like Spark's Kafka source, the driver resolves every topic-partition's offset range
(``plan.py``: the subscription's partitions, ListOffsets on the leaders for ``earliest``,
``latest`` and timestamps) and plans one Spark partition per range; a range longer than
``maxRecordsPerPartition`` offsets is split, and ``minPartitions`` splits further. Executors
fetch raw RecordBatch v2 batches from the partition's leader with the API key, decode them
with ``brokernodes.records`` and hand Spark Arrow batches (``reading.py``). Streaming reads
keep their position as Kafka's JSON offsets in the checkpoint (``stream.py``).

Options beyond Kafka's: ``bootstrap`` (Kafka's ``kafka.bootstrap.servers`` is the same),
``apiKey`` (``<key_id>.<secret>``) or ``clusterSecret`` (the operators' read-only credential,
which sees every tenant's topics by id), ``topic`` (the same as ``subscribe``), ``tenant``
(the ``tenant`` column's value), ``decode`` (``raw``, ``consumer_offsets`` or ``usage``; the
default follows the topic name) and ``includeUnreadable`` (a batch that cannot be decoded
becomes one row with a non-null ``unreadable`` column instead of being skipped and logged).
docs/analytics.md has the table of Kafka's options and which are supported.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader

from spark.datasource.internal import CONSUMER_OFFSETS, USAGE
from spark.datasource.options import SluiceOptionError, SourceOptions, parse_source_options
from spark.datasource.plan import (
    OffsetRange,
    client_for,
    plan_ranges,
    resolve,
    split_range,
    subscribed,
)
from spark.datasource.reading import PartitionReader
from spark.datasource.stream import SluiceStreamReader

__all__ = [
    "OffsetRange",
    "SluiceDataSource",
    "SluiceOptionError",
    "SluiceReader",
    "register",
    "split_range",
]

RAW_COLUMNS = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"
TENANT_COLUMN = "tenant string"
RAW_SCHEMA = f"{RAW_COLUMNS}, {HEADERS_COLUMN}, {TENANT_COLUMN}"
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


def decode_of(opts: SourceOptions) -> str:
    """The ``decode`` option, else by topic name when the one subscribed topic is internal."""
    if opts.decode:
        if opts.decode not in SCHEMAS:
            raise SluiceOptionError(f"decode must be one of {sorted(SCHEMAS)}, not {opts.decode!r}")
        return opts.decode
    topics = opts.subscription.topics
    if len(topics) == 1:
        return {CONSUMER_OFFSETS: "consumer_offsets", USAGE: "usage"}.get(topics[0], "raw")
    return "raw"


def schema_of(opts: SourceOptions) -> str:
    """Kafka's columns (``headers`` with ``includeHeaders``) plus ``tenant`` (and
    ``unreadable`` with ``includeUnreadable``), or an internal topic's schema."""
    decode = decode_of(opts)
    if decode != "raw":
        return SCHEMAS[decode]
    columns = [RAW_COLUMNS]
    if opts.include_headers:
        columns.append(HEADERS_COLUMN)
    columns.append(TENANT_COLUMN)
    if opts.include_unreadable:
        columns.append(UNREADABLE_COLUMN)
    return ", ".join(columns)


class SluiceDataSource(DataSource):
    """The ``sluice`` format."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _source_options(self, *, streaming: bool) -> SourceOptions:
        return parse_source_options(dict(self.options), streaming=streaming)

    def schema(self) -> str:
        # the same columns either way; the batch checks reject stream-only options later
        return schema_of(self._source_options(streaming=self._streaming_guess()))

    def _streaming_guess(self) -> bool:
        names = {k.lower() for k in self.options}
        return not names & {"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"}

    def reader(self, schema) -> DataSourceReader:
        opts = self._source_options(streaming=False)
        return SluiceReader(opts, PartitionReader(opts, decode_of(opts), schema))

    def streamReader(self, schema) -> SluiceStreamReader:
        opts = self._source_options(streaming=True)
        return SluiceStreamReader(opts, PartitionReader(opts, decode_of(opts), schema))

    def writer(self, schema, overwrite: bool):
        """``df.write.format("sluice")``: the sink (``sink.py``)."""
        from spark.datasource.sink import SinkOptions, SluiceSinkWriter

        return SluiceSinkWriter(SinkOptions.parse(dict(self.options), schema), overwrite)

    def streamWriter(self, schema, overwrite: bool):
        """``df.writeStream.format("sluice")``: the sink per micro-batch (``sink.py``)."""
        from spark.datasource.sink import SinkOptions, SluiceStreamSinkWriter

        return SluiceStreamSinkWriter(SinkOptions.parse(dict(self.options), schema))


class SluiceReader(DataSourceReader):
    """A batch read: ``[start, end)`` of every subscribed partition, planned once."""

    def __init__(self, opts: SourceOptions, read_partition: PartitionReader) -> None:
        self.opts = opts
        self._read_partition = read_partition

    def partitions(self) -> list[OffsetRange]:
        client = client_for(self.opts)
        try:
            metas = subscribed(client, self.opts.subscription)
            start = resolve(client, metas, self.opts.starting, self.opts, ending=False)
            end = resolve(client, metas, self.opts.ending, self.opts, ending=True)
        finally:
            client.close()
        return plan_ranges(
            metas, start, end, self.opts.max_records_per_partition, self.opts.min_partitions
        )

    def read(self, partition):
        return self._read_partition(partition)


def register(spark) -> None:
    """Make ``format("sluice")`` available in this session."""
    spark.dataSource.register(SluiceDataSource)
