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
import pyarrow.compute as pc

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
        last = None
        try:
            for last in read_range(
                client, meta, offset, end, fail_on_data_loss=True, refresh_leader=refresh_leader
            ):
                yield last
            return
        except BrokerReadError as e:
            if last is not None:  # where to go on from: after what was read
                r = last[0]
                offset = (r.last_offset if isinstance(r, UnreadableBatch) else r.offset) + 1
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
    """Cuts one partition's records into Arrow record batches of the raw schema, at most
    ``ROWS_PER_ARROW_BATCH`` rows each. The loop over records only appends to lists (it is
    most of the executor's Python time next to decoding); timestamps are scaled to
    microseconds and the constant columns filled by Arrow."""

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

    def batches(self, items: Iterator) -> Iterator[pa.RecordBatch]:
        """``(record, timestamp type)`` items, where an unreadable batch comes as
        ``(UnreadableBatch, -1)``: a row only with the ``unreadable`` column, else logged."""
        size = ROWS_PER_ARROW_BATCH
        headers_on, marked = self.include_headers, self.include_unreadable
        cols: tuple[list, ...] = ([], [], [], [], [], [], [])
        keys, values, offsets, stamps, types, headers, bad = cols
        for r, tstype in items:
            if tstype < 0:
                if not marked:
                    log_skipped(self.topic, self.partition, r, self.tenant)
                    continue
                keys.append(None)
                values.append(None)
                offsets.append(r.base_offset)
                stamps.append(None)
                types.append(None)
                headers.append([])
                bad.append(r.reason)
            else:
                keys.append(r.key)
                values.append(r.value)
                offsets.append(r.offset)
                stamps.append(r.timestamp)
                types.append(tstype)
                if headers_on:
                    headers.append(r.headers)
                if marked:
                    bad.append(None)
            if len(offsets) >= size:
                yield self.batch(*cols)
                cols = ([], [], [], [], [], [], [])
                keys, values, offsets, stamps, types, headers, bad = cols
        if offsets:
            yield self.batch(*cols)

    def batch(self, keys, values, offsets, stamps, types, headers, bad) -> pa.RecordBatch:
        n = len(offsets)
        s = self.schema
        ms = pa.array(stamps, pa.int64())
        columns = {
            "key": pa.array(keys, s.field("key").type),
            "value": pa.array(values, s.field("value").type),
            "topic": pa.repeat(pa.scalar(self.topic, s.field("topic").type), n),
            "partition": pa.repeat(pa.scalar(self.partition, s.field("partition").type), n),
            "offset": pa.array(offsets, s.field("offset").type),
            "timestamp": pc.multiply(ms, US_PER_MS).cast(s.field("timestamp").type),
            "timestampType": pa.array(types, s.field("timestampType").type),
            "tenant": pa.repeat(pa.scalar(self.tenant, s.field("tenant").type), n),
        }
        if self.include_headers:
            columns["headers"] = pa.array(headers, s.field("headers").type)
        if self.include_unreadable:
            columns["unreadable"] = pa.array(bad, s.field("unreadable").type)
        return pa.RecordBatch.from_arrays([columns[name] for name in s.names], schema=s)


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
                yield from self._rows(partition).batches(items)
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
