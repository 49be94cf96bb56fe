"""Reading one offset range on an executor, for batch and streaming reads alike.

Records come from ``broker.read_range`` (raw RecordBatch v2 from the leader) and leave as
Arrow record batches of the source's schema, built column by column (``ArrowRows``): Spark
takes Arrow as it is, where tuples would be checked and converted again one value at a time.

Records retention deleted before they were read (the range's start is below the log start
offset) are data loss: with ``failOnDataLoss`` the task fails saying which offsets and how
many; without, it logs that and reads on from the log start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from spark.datasource.broker import BrokerClient, BrokerReadError, PartitionMeta, read_range
from spark.datasource.validity import UnreadableBatch

ROWS_PER_ARROW_BATCH = 8192
US_PER_MS = 1000

logger = logging.getLogger("sluice.spark.source")


class DataLossError(BrokerReadError):
    """Offsets a query was to read are gone (retention, truncation, a deleted partition)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "DATA_LOSS")


def lost(topic: str, partition: int, first: int, end: int) -> str:
    n = end - first
    return (
        f"{topic}-{partition}: {n} record{'s' if n != 1 else ''} at offsets {first}..{end - 1} "
        "were deleted by retention before this query read them"
    )


def records(
    client: BrokerClient,
    meta: PartitionMeta,
    start: int,
    end: int,
    *,
    fail_on_data_loss: bool,
    refresh_leader=None,
) -> Iterator:
    """``read_range`` of ``[start, end)`` with data loss reported (failed or logged)."""
    offset = start
    while offset < end:
        try:
            for item in read_range(
                client, meta, offset, end, fail_on_data_loss=True, refresh_leader=refresh_leader
            ):
                r = item[0]
                offset = (r.last_offset if isinstance(r, UnreadableBatch) else r.offset) + 1
                yield item
            return
        except BrokerReadError as e:
            log_start = (
                e.body.get("log_start_offset") if e.error_code == "OFFSET_OUT_OF_RANGE" else None
            )
            if log_start is None or int(log_start) <= offset:
                raise
            gone_to = min(int(log_start), end)
            message = lost(meta.topic, meta.partition, offset, gone_to)
            if fail_on_data_loss:
                raise DataLossError(
                    f"{message}; set failOnDataLoss=false to skip them and read on"
                ) from e
            logger.warning("%s; skipped them (failOnDataLoss=false)", message)
            offset = gone_to


class ArrowRows:
    """The raw schema's columns for one partition, appended per record and cut into Arrow
    record batches of ``ROWS_PER_ARROW_BATCH`` rows."""

    def __init__(
        self,
        schema: pa.Schema,
        topic: str,
        partition: int,
        tenant: str | None,
        *,
        include_headers: bool,
        include_unreadable: bool,
    ) -> None:
        self.schema = schema
        self.topic, self.partition, self.tenant = topic, partition, tenant
        self.include_headers = include_headers
        self.include_unreadable = include_unreadable
        self._clear()

    def _clear(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.stamps: list = []
        self.types: list = []
        self.headers: list = []
        self.unreadable: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, r, tstype: int) -> None:
        if isinstance(r, UnreadableBatch):
            self.keys.append(None)
            self.values.append(None)
            self.offsets.append(r.base_offset)
            self.stamps.append(None)
            self.types.append(None)
            self.headers.append([])
            self.unreadable.append(r.reason)
            return
        self.keys.append(r.key)
        self.values.append(r.value)
        self.offsets.append(r.offset)
        self.stamps.append(r.timestamp * US_PER_MS)
        self.types.append(tstype)
        if self.include_headers:
            self.headers.append(r.headers)
        self.unreadable.append(None)

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        s = self.schema
        columns = {
            "key": pa.array(self.keys, s.field("key").type),
            "value": pa.array(self.values, s.field("value").type),
            "topic": pa.repeat(pa.scalar(self.topic, s.field("topic").type), n),
            "partition": pa.repeat(pa.scalar(self.partition, s.field("partition").type), n),
            "offset": pa.array(self.offsets, s.field("offset").type),
            "timestamp": pa.array(self.stamps, s.field("timestamp").type),
            "timestampType": pa.array(self.types, s.field("timestampType").type),
            "tenant": pa.repeat(pa.scalar(self.tenant, s.field("tenant").type), n),
        }
        if self.include_headers:
            columns["headers"] = pa.array(self.headers, s.field("headers").type)
        if self.include_unreadable:
            columns["unreadable"] = pa.array(self.unreadable, s.field("unreadable").type)
        self._clear()
        return pa.RecordBatch.from_arrays([columns[name] for name in s.names], schema=s)


def arrow_batches(items: Iterator, rows: ArrowRows) -> Iterator[pa.RecordBatch]:
    """``(record or UnreadableBatch, timestamp type)`` items as Arrow batches; unreadable
    batches become rows only when the schema has the ``unreadable`` column."""
    for r, tstype in items:
        if isinstance(r, UnreadableBatch) and not rows.include_unreadable:
            log_skipped(rows.topic, rows.partition, r, rows.tenant)
            continue
        rows.add(r, tstype)
        if len(rows) >= ROWS_PER_ARROW_BATCH:
            yield rows.batch()
    if len(rows):
        yield rows.batch()


def log_skipped(topic: str, partition: int, bad: UnreadableBatch, tenant: str | None) -> None:
    logger.warning(
        "skipped an unreadable batch of %s-%s (tenant %s), offsets %d..%d: %s",
        topic,
        partition,
        tenant or "-",
        bad.base_offset,
        bad.last_offset,
        bad.reason,
    )


class PartitionReader:
    """What an executor runs for one planned range (pickled with the reader): the raw schema
    as Arrow batches, the internal topics' schemas as rows."""

    def __init__(self, opts, decode: str, schema) -> None:
        self.opts = opts
        self.decode = decode
        self.schema = schema  # the StructType Spark asked for

    def __call__(self, partition):
        from spark.datasource.plan import OffsetRange, client_for

        if not isinstance(partition, OffsetRange):
            return  # nothing planned: Spark still runs one task with a bare InputPartition
        client = client_for(self.opts)

        def refresh(meta: PartitionMeta) -> PartitionMeta:
            for m in client.partitions(meta.topic):
                if m.partition == meta.partition:
                    return m
            return meta

        try:
            items = records(
                client,
                partition.meta(),
                partition.start,
                partition.end,
                fail_on_data_loss=self.opts.fail_on_data_loss,
                refresh_leader=refresh,
            )
            if self.decode == "raw":
                yield from arrow_batches(items, self._rows(partition))
            else:
                yield from internal_rows(items, self.decode, partition, self.opts.tenant)
        finally:
            client.close()

    def _rows(self, partition) -> ArrowRows:
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self.schema, timezone="UTC")
        return ArrowRows(
            schema,
            partition.topic,
            partition.partition,
            self.opts.tenant,
            include_headers="headers" in schema.names,
            include_unreadable="unreadable" in schema.names,
        )


def internal_rows(items: Iterator, decode: str, partition, tenant: str | None) -> Iterator[tuple]:
    """``__consumer_offsets`` or ``__usage`` records as rows of their schemas (small topics:
    tuples are fine); unreadable batches are skipped and logged."""
    from spark.datasource.internal import decode_offsets_row, decode_usage_row

    offsets = decode == "consumer_offsets"
    for r, _ in items:
        if isinstance(r, UnreadableBatch):
            log_skipped(partition.topic, partition.partition, r, tenant)
            continue
        row = decode_offsets_row(r, tenant) if offsets else decode_usage_row(r)
        if row is not None:
            yield row
