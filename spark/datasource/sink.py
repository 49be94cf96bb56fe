"""``df.write.format("sluice")`` and ``df.writeStream.format("sluice")``: the sink.

Columns as Spark's Kafka sink: ``value`` (binary or string, required), optional ``key``
(binary or string), ``headers`` (``array<struct<key: string, value: binary>>``),
``partition`` (int) and ``topic`` (string; the ``topic`` option overrides it). Other columns
are ignored. Each task writes its rows through the SDK's idempotent producer (batched,
acks=all by default) as a producer whose identity and sequences do not change between
attempts (``sink_identity``), so a retried task or a replayed micro-batch appends no record
twice. Options:

==============================  ==============================================================
``bootstrap``                   broker URL(s), comma-separated (or ``kafka.bootstrap.servers``;
                                ``host:port`` without a scheme means ``http://host:port``)
``apiKey``                      ``<key_id>.<secret>`` of a principal allowed to WRITE the topics
``topic``                       the topic of every row (else the ``topic`` column)
``acks``                        ``all`` (default) or ``1`` (``kafka.acks`` too); not ``0``:
                                without acknowledgements there is no producer state to resume
``compression``                 none (default), gzip, snappy, lz4, zstd
                                (``kafka.compression.type`` too)
``batchSize``                   producer batch size in bytes (default 262144; ``kafka.batch.size``)
``lingerMs``                    producer linger (default 5; ``kafka.linger.ms``)
``transactional.id.prefix``     write in transactions (``sink_txn``): read_committed readers
                                see the whole write at its commit, or none of it
``transaction.timeout.ms``      with a prefix: how long a write may take to commit (default
                                and most 900000)
==============================  ==============================================================
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from brokernodes.client.producer import parse_compression
from brokernodes.errors import SluiceError
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import read_header
from spark.datasource.broker import BrokerClient, BrokerReadError
from spark.datasource.sink_identity import (
    PRODUCER_EPOCH,
    KeylessPartitioner,
    PartitionProgress,
    SinkError,
    content,
    key_partition,
    producer_id_for,
    resume_point,
)
from spark.datasource.sink_txn import TxnEnd, end_transactions, open_transaction, transactional_id

logger = logging.getLogger("sluice.spark.sink")

DEFAULT_BATCH_SIZE = 256 * 1024
KEY_CACHE_SIZE = 65536
RESUME_WAIT_S = 30.0  # at most this long for an earlier attempt's last batch to be replicated
QUERY_ID = "sql.streaming.queryId"  # Spark's local properties of a micro-batch's tasks
BATCH_ID = "streaming.sql.batchId"
_ALIASES = {
    "kafka.bootstrap.servers": "bootstrap",
    "kafka.acks": "acks",
    "kafka.compression.type": "compression",
    "kafka.batch.size": "batchsize",
    "kafka.linger.ms": "lingerms",
}


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: list[str]
    api_key: str
    topic: str | None
    acks: str
    compression: str
    batch_size: int
    linger_ms: float
    txn_prefix: str | None = None  # transactional.id.prefix: the transactional mode
    txn_timeout_ms: int = 900_000

    @classmethod
    def parse(cls, raw: dict[str, str], schema: StructType) -> SinkOptions:
        """Options (case-insensitive) and the DataFrame's columns, checked on the driver."""
        o = {k.lower(): v for k, v in raw.items()}
        for alias, name in _ALIASES.items():
            if o.get(alias) and not o.get(name):
                o[name] = o[alias]
        if not o.get("bootstrap"):
            raise SinkError(
                "option 'bootstrap' (or 'kafka.bootstrap.servers') is required: the broker URL(s)",
                "INVALID_CONFIG",
            )
        if not o.get("apikey"):
            raise SinkError(
                "option 'apiKey' is required: '<key_id>.<secret>' of a principal that may "
                "WRITE the topic",
                "INVALID_CONFIG",
            )
        acks = str(o.get("acks", "all")).strip().lower()
        acks = "all" if acks == "-1" else acks
        if acks not in ("all", "1"):
            raise SinkError(
                f"acks={acks!r}: the sink writes with acks=all (default) or acks=1; acks=0 "
                "gets no acknowledgement, so a retried task could not tell what was written",
                "INVALID_CONFIG",
            )
        topic = o.get("topic") or None
        _check_columns(schema, topic)
        urls = [
            u if "://" in u else f"http://{u}"
            for u in (s.strip() for s in o["bootstrap"].split(","))
            if u
        ]
        try:
            batch_size = int(o.get("batchsize", DEFAULT_BATCH_SIZE))
            linger_ms = float(o.get("lingerms", 5))
            parse_compression(o.get("compression", "none"))
            if batch_size <= 0 or linger_ms < 0:
                raise ValueError("batchSize must be positive and lingerMs not negative")
        except ValueError as e:
            raise SinkError(
                f"option batchSize, lingerMs or compression: {e}", "INVALID_CONFIG"
            ) from e
        prefix = o.get("transactional.id.prefix") or None
        try:
            txn_timeout_ms = int(o.get("transaction.timeout.ms", 900_000))
            if not 0 < txn_timeout_ms <= 900_000:
                raise ValueError(f"{txn_timeout_ms} is not in 1..900000")
        except ValueError as e:
            raise SinkError(f"option transaction.timeout.ms: {e}", "INVALID_CONFIG") from e
        if prefix is not None and acks != "all":
            raise SinkError("transactional.id.prefix needs acks=all", "INVALID_CONFIG")
        return cls(
            urls,
            o["apikey"],
            topic,
            acks,
            o.get("compression", "none"),
            batch_size,
            linger_ms,
            prefix,
            txn_timeout_ms,
        )


_KEY_VALUE = (BinaryType, StringType)


def _check_columns(schema: StructType, topic: str | None) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SinkError(
            "the DataFrame has no 'value' column (binary or string); select one, e.g. "
            "df.selectExpr('CAST(x AS STRING) AS value')",
            "INVALID_RECORD",
        )
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], _KEY_VALUE):
            raise SinkError(
                f"column {name!r} is {fields[name].simpleString()}; cast it to binary or string",
                "INVALID_RECORD",
            )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SinkError(
            f"column 'partition' is {fields['partition'].simpleString()}; it must be int",
            "INVALID_RECORD",
        )
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SinkError("column 'topic' must be string", "INVALID_RECORD")
    if topic is None and "topic" not in fields:
        raise SinkError(
            "no topic: set option 'topic' or give the DataFrame a 'topic' column",
            "INVALID_CONFIG",
        )
    h = fields.get("headers")
    if h is not None and not (
        isinstance(h, ArrayType)
        and isinstance(h.elementType, StructType)
        and [(f.name, type(f.dataType)) for f in h.elementType.fields]
        == [("key", StringType), ("value", BinaryType)]
    ):
        raise SinkError(
            f"column 'headers' is {h.simpleString()}; it must be "
            "array<struct<key: string, value: binary>>",
            "INVALID_RECORD",
        )


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """What one task did: records sent, records an earlier attempt had already appended."""

    spark_partition: int
    producer_id: int
    written: int
    already_written: int
    # the transactional mode: the task's open transaction, which the driver ends
    transactional_id: str | None = None
    producer_epoch: int = -1


def _task_context():
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise SinkError("the sink's write runs only in a Spark task", "INVALID_REQUEST")
    return ctx


def write_task(options: SinkOptions, write_id: str, batch_id: int, batches) -> SinkCommitMessage:
    """One task: every row of ``batches`` (pyarrow RecordBatches) to its topic-partition,
    skipping on each partition what an earlier attempt of this task already appended."""
    from spark.datasource.sink_producer import SinkProducer

    spark_partition = _task_context().partitionId()
    tid = None
    if options.txn_prefix is not None:  # every record in this attempt's transaction
        tid = transactional_id(options.txn_prefix, write_id, batch_id, spark_partition)
        producer = open_transaction(options, tid)
        producer_id = producer.producer_id
    else:
        producer_id = producer_id_for(write_id, batch_id, spark_partition)
        producer = SinkProducer(
            options.bootstrap,
            options.api_key,
            producer_id=producer_id,
            acks=options.acks,
            compression=options.compression,
            batch_size=options.batch_size,
            linger_ms=options.linger_ms,
        )
    progress: dict[tuple[str, int], PartitionProgress] = {}
    partitions: dict[str, int] = {}
    keyless = KeylessPartitioner(producer_id, options.batch_size)
    key_cache: dict[tuple[str, bytes | str], int] = {}  # murmur2 is ~1.5 us a key
    open_batches: list = []  # each producer batch once, to check for failures
    written = skipped = 0
    try:
        for batch in batches:
            n = batch.num_rows
            cols = batch.schema.names
            values = _as_bytes(batch.column("value"))
            keys = _as_bytes(batch.column("key")) if "key" in cols else None
            headers = batch.column("headers").to_pylist() if "headers" in cols else None
            explicit = batch.column("partition").to_pylist() if "partition" in cols else None
            topics = (
                batch.column("topic").to_pylist()
                if options.topic is None and "topic" in cols
                else None
            )
            last_batch = None
            for i in range(n):
                topic = options.topic or topics[i]
                if not topic:
                    raise SinkError(
                        "a row's 'topic' is null and no 'topic' option is set", "INVALID_RECORD"
                    )
                count = partitions.get(topic)
                if count is None:
                    count = partitions[topic] = producer.partitions_of(topic)
                key = keys[i] if keys is not None else None
                value = values[i]
                p = explicit[i] if explicit is not None else None
                if p is None:
                    if key is not None:
                        p = key_cache.get((topic, key))
                        if p is None:
                            if len(key_cache) >= KEY_CACHE_SIZE:
                                key_cache.clear()
                            b = key.encode() if type(key) is str else key
                            p = key_cache[(topic, key)] = key_partition(b, count)
                    else:
                        size = 16 + (len(value) if value is not None else 0)
                        p = keyless.partition(topic, count, size)
                elif not 0 <= p < count:
                    raise SinkError(
                        f"a row's partition {p} does not exist: topic {topic!r} has "
                        f"{count} partitions",
                        "UNKNOWN_TOPIC_OR_PARTITION",
                    )
                state = progress.get((topic, p))
                if state is None:
                    state = progress[(topic, p)] = (
                        PartitionProgress(0) if tid is not None else _resume(producer, topic, p)
                    )
                h = headers[i] if headers is not None else None
                if not state.admit():
                    skipped += 1
                    if state.verifying():
                        pairs = [(x["key"], x["value"]) for x in h] if h else ()
                        state.observe(content(key, value, pairs), f"{topic}-{p}")
                    continue
                future = producer.send(
                    topic,
                    value,
                    key,
                    [(x["key"], x["value"]) for x in h] if h else None,
                    partition=p,
                )
                written += 1
                if future[0] is not last_batch:
                    last_batch = future[0]
                    open_batches.append(last_batch)
            open_batches = _check_failures(open_batches)
        producer.flush()
        _check_failures(open_batches)
        for (topic, p), state in progress.items():
            state.finish(f"{topic}-{p}")
    except BaseException as e:
        if tid is not None:  # nothing of this attempt is ever read committed
            with contextlib.suppress(Exception):
                producer.abort_transaction(30)
        if isinstance(e, SluiceError):
            raise SinkError(e.message, e.error_code) from e
        raise
    finally:
        producer.close(timeout=30)
    if tid is not None:
        return SinkCommitMessage(
            spark_partition, producer_id, written, skipped, tid, producer.producer_epoch
        )
    return SinkCommitMessage(spark_partition, producer_id, written, skipped)


def end_writes(options: SinkOptions, messages, commit: bool) -> None:
    """The transactional mode's end of a write: every task's transaction committed (or
    aborted) by the driver."""
    ends = [
        TxnEnd(m.transactional_id, m.producer_id, m.producer_epoch)
        for m in messages
        if isinstance(m, SinkCommitMessage) and m.transactional_id is not None
    ]
    if ends:
        end_transactions(options, ends, commit)


def _as_bytes(column) -> list:
    """A key or value column as Python ``bytes`` (string columns cast in Arrow, which is
    cheaper than encoding each ``str`` in the producer)."""
    import pyarrow as pa

    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    elif pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary())
    return column.to_pylist()


def _resume(producer, topic: str, partition: int) -> PartitionProgress:
    """Where this task's records on ``topic``-``partition`` start (after an earlier
    attempt's), waiting until that attempt's last batch is on every in-sync replica."""
    deadline = time.monotonic() + RESUME_WAIT_S
    while True:
        answer = producer.describe(topic, partition)
        done = resume_point(answer, producer.producer_id, PRODUCER_EPOCH)
        if done is not None:
            break
        if time.monotonic() > deadline:
            raise SinkError(
                f"{topic}-{partition}: an earlier attempt's last batch (offset "
                f"{answer.get('last_offset')}) is still above the high watermark "
                f"{answer.get('high_watermark')} after {RESUME_WAIT_S:g}s; check the "
                "partition's in-sync replicas",
                "NOT_ENOUGH_REPLICAS",
            )
        time.sleep(0.2)
    if done:
        logger.info(
            "sink producer %d: %s-%s already holds its first %d records (an earlier "
            "attempt); resuming after them",
            producer.producer_id,
            topic,
            partition,
            done,
        )
    producer.resume(topic, partition, done)
    if not done:
        return PartitionProgress(0)
    return PartitionProgress(done, _last_batch(producer, topic, partition, answer))


def _last_batch(producer, topic: str, partition: int, answer: dict) -> list:
    """The contents of the earlier attempt's last batch on the partition, read back."""
    first = int(answer["last_batch_first_offset"])
    body = producer.fetch(topic, partition, first)
    pos = 0
    while pos < len(body):
        header = read_header(body, pos)
        if header.base_offset <= first <= header.last_offset:
            batch = decode_batch(body, pos)
            return [
                content(r.key, r.value, r.headers)
                for r in batch.records
                if r.offset <= int(answer["last_offset"])
            ]
        pos += header.size
    raise SinkError(
        f"{topic}-{partition}: the producer's last batch at offset {first} is not in the "
        "log any more (retention?); what an earlier attempt wrote cannot be checked",
        "OFFSET_OUT_OF_RANGE",
    )


def _check_failures(batches: list) -> list:
    """Raise the first failed batch's error; the batches not done yet."""
    pending = []
    for b in batches:
        if not b.done:
            pending.append(b)
        elif b.error is not None:
            error = b.error
            code = getattr(error, "error_code", "UNKNOWN_SERVER_ERROR")
            message = getattr(error, "message", str(error))
            raise SinkError(f"{b.topic}-{b.partition}: {message}", code) from error
    return pending


def _summary(messages) -> tuple[int, int, int]:
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    return (
        len(done),
        sum(m.written for m in done),
        sum(m.already_written for m in done),
    )


def check_topic(options: SinkOptions) -> None:
    """On the driver, before any task: the ``topic`` option names a topic this key can see
    (a wrong name or key fails once, not in every task attempt)."""
    if options.topic is None:
        return
    client = BrokerClient(",".join(options.bootstrap), options.api_key)
    try:
        client.partitions(options.topic)
    except BrokerReadError as e:
        raise SinkError(f"option 'topic': {e}", e.error_code) from e
    finally:
        client.close()


class SluiceSinkWriter(DataSourceArrowWriter):
    """``df.write.format("sluice")``: one write id per job, made on the driver."""

    def __init__(self, options: SinkOptions, overwrite: bool = False) -> None:
        if overwrite:
            raise SinkError(
                "a topic is an append-only log: mode('overwrite') cannot replace its "
                "records; write with mode('append')",
                "INVALID_REQUEST",
            )
        check_topic(options)
        self.options = options
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator) -> SinkCommitMessage:
        return write_task(self.options, self.write_id, 0, iterator)

    def commit(self, messages) -> None:
        end_writes(self.options, messages, True)
        tasks, written, resumed = _summary(messages)
        logger.info(
            "sluice sink %s: %d tasks wrote %d records (%d found already written by "
            "earlier attempts)",
            self.write_id,
            tasks,
            written,
            resumed,
        )

    def abort(self, messages) -> None:
        end_writes(self.options, messages, False)
        tasks, written, _ = _summary(messages)
        logger.warning(
            "sluice sink %s failed: the %d records its %d finished tasks wrote stay in the "
            "topic (a log has no rollback); a rerun is a new write and writes them again",
            self.write_id,
            written,
            tasks,
        )


class SluiceStreamSinkWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("sluice")``: the producer identity comes from the query id
    (kept in the checkpoint, so a restarted query has the same one) and the batch id."""

    def __init__(self, options: SinkOptions) -> None:
        check_topic(options)
        self.options = options

    def write(self, iterator: Iterator) -> SinkCommitMessage:
        ctx = _task_context()
        query_id = ctx.getLocalProperty(QUERY_ID)
        batch_id = ctx.getLocalProperty(BATCH_ID)
        if not query_id or batch_id is None:
            raise SinkError(
                f"the task has no {QUERY_ID}/{BATCH_ID} local property; the sluice stream "
                "sink needs a micro-batch query",
                "INVALID_REQUEST",
            )
        return write_task(self.options, query_id, int(batch_id), iterator)

    def commit(self, messages, batchId: int) -> None:
        end_writes(self.options, messages, True)
        tasks, written, resumed = _summary(messages)
        logger.info(
            "sluice stream sink batch %d: %d tasks wrote %d records (%d already written "
            "before a retry or restart)",
            batchId,
            tasks,
            written,
            resumed,
        )

    def abort(self, messages, batchId: int) -> None:
        end_writes(self.options, messages, False)
        logger.warning(
            "sluice stream sink batch %d aborted: records already written stay; the "
            "query's retry of this batch skips them",
            batchId,
        )
