"""The Spark sink's throughput (``spark.sink.records_per_s``), run by ``bench/spark.py`` in
its session (``local[2]``).

One broker process (``harness.broker``) with topic ``sink`` in 6 partitions; the records are
``spark.range`` rows turned into 1,000 distinct keys and 100-byte values, written with
``df.write.format("sluice")`` (acks=all, the sink's defaults) from 2 Spark partitions. The
peer is the SDK's ``Producer`` sending the same records from one Python process
(idempotent, acks=all, batch size 256 KiB as the sink's). Each side writes once untimed (a
warm-up), then ``RUNS`` times; the figure is the median. After each run the topic's log end
offsets must have grown by exactly the records written: the sink's retry rule is not measured
on a write that lost or doubled records.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.report import Metric, run_times

TOPIC, PARTITIONS = "sink", 6
RUNS = 3
VALUE = 100


def _end_offsets(client) -> int:
    return sum(client.list_offset(meta, "latest") for meta in client.partitions(TOPIC))


def _spark_write(spark, broker, n: int) -> None:
    from pyspark.sql import functions as F

    df = spark.range(0, n, numPartitions=2).select(
        F.concat(F.lit("key-"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.rpad(F.col("id").cast("string"), VALUE, "x").alias("value"),
    )
    (
        df.write.format("sluice")
        .option("bootstrap", broker.url)
        .option("apiKey", broker.api_key)
        .option("topic", TOPIC)
        .mode("append")
        .save()
    )


def _sdk_write(broker, n: int) -> None:
    from brokernodes.client import Producer

    with Producer(broker.url, broker.api_key, acks="all", batch_size=256 * 1024) as p:
        for i in range(n):
            p.send(TOPIC, str(i).ljust(VALUE, "x"), key=f"key-{i % 1000}")
        p.flush()


def measure(spark, quick: bool) -> Metric:
    from harness.broker import BrokerLauncher
    from spark.datasource.broker import BrokerClient

    n = 200_000 if quick else 1_000_000
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-sink-"))
    launcher = BrokerLauncher(base)
    try:
        broker = launcher({TOPIC: (PARTITIONS, {})})
        client = BrokerClient(broker.url, broker.api_key)

        def timed(write) -> float:
            before = _end_offsets(client)
            started = time.perf_counter()
            write()
            took = time.perf_counter() - started
            grown = _end_offsets(client) - before
            if grown != n:
                raise RuntimeError(f"wrote {n:,} records but the log grew by {grown:,}")
            return took

        sink_runs, sdk_runs = [], []
        timed(lambda: _spark_write(spark, broker, n))
        timed(lambda: _sdk_write(broker, n))
        for _ in range(RUNS):
            sink_runs.append(timed(lambda: _spark_write(spark, broker, n)))
            sdk_runs.append(timed(lambda: _sdk_write(broker, n)))
        client.close()
    finally:
        launcher.close()
        shutil.rmtree(base, ignore_errors=True)
    fmt, peer_fmt = run_times(sink_runs), run_times(sdk_runs)
    print(f"spark: sink {n:,} records: Spark {fmt}; SDK producer {peer_fmt}", flush=True)
    return Metric(
        name="spark.sink.records_per_s",
        value=round(n / statistics.median(sink_runs)),
        unit="records/s",
        better="higher",
        workload=f"df.write.format('sluice') of {n:,} records (1,000 keys, {VALUE}-byte "
        f"values) from 2 Spark partitions on local[2] to one broker ({PARTITIONS} "
        f"partitions, acks=all), the log end offsets checked after each run; median of "
        f"{RUNS} after a warm-up",
        peer="the SDK's Producer in one Python process, same records, acks=all, "
        "idempotent, batch 256 KiB",
        peer_value=round(n / statistics.median(sdk_runs)),
        rounds=f"Spark {fmt}, peer {peer_fmt}",
    )
