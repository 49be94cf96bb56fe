"""Spark sink scenarios run in a process of their own (``python -m tests.spark.sink_scenarios
ARGS.json``): task retries need ``local[N,F]`` (F attempts per task), which the test run's
shared ``local[2]`` session cannot be switched to. Each scenario writes one topic and puts
what the sink's commits reported in the results file; the tests read the topics back.

The faults are test subclasses of the sink, registered as ``sluice_faulty``: the first
attempt of a chosen task raises after its records so far were acknowledged (Spark retries
it), and a stream's commit of micro-batch 1 raises once (the query stops after the batch's
tasks wrote it; the restarted query replays it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from spark.datasource.sink import SinkOptions, SluiceSinkWriter, SluiceStreamSinkWriter
from spark.datasource.source import SluiceDataSource


def _append(path: str, doc: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(doc) + "\n")


def _faulty(iterator, options: dict):
    """Yield the batches; on the first attempt of Spark partition ``failPartition``, wait
    after ``failAfterBatches`` batches for their records to be acknowledged, then raise."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    fail = (
        ctx.attemptNumber() == 0
        and ctx.partitionId() == int(options.get("failpartition", -1))
        and (
            options.get("failbatch") is None
            or ctx.getLocalProperty("streaming.sql.batchId") == options["failbatch"]
        )
    )
    after = int(options.get("failafterbatches", 3))
    if ctx.attemptNumber() > 0 and options.get("reorderonretry"):
        # a retry that sees its rows in another order (a shuffle's blocks on a cluster)
        iterator = (b.take(list(range(b.num_rows - 1, -1, -1))) for b in iterator)
    for i, batch in enumerate(iterator):
        if fail and i == after:
            time.sleep(1.5)  # linger is 5 ms: the batches sent so far are acknowledged
            raise RuntimeError("injected fault: first attempt of the task dies mid-write")
        yield batch


class FaultyWriter(SluiceSinkWriter):
    def __init__(self, options, raw):
        super().__init__(options)
        self.raw = raw

    def write(self, iterator):
        return super().write(_faulty(iterator, self.raw))

    def commit(self, messages):
        super().commit(messages)
        _append(
            self.raw["summarypath"], {"batch": None, "messages": [m.__dict__ for m in messages]}
        )


class FaultyStreamWriter(SluiceStreamSinkWriter):
    def __init__(self, options, raw):
        super().__init__(options)
        self.raw = raw

    def write(self, iterator):
        return super().write(_faulty(iterator, self.raw))

    def commit(self, messages, batchId):
        super().commit(messages, batchId)
        _append(
            self.raw["summarypath"],
            {"batch": batchId, "messages": [m.__dict__ for m in messages]},
        )
        marker = self.raw.get("failcommitmarker")
        if marker and batchId == 1 and not os.path.exists(marker):
            Path(marker).touch()
            raise RuntimeError("injected fault: the driver dies before batch 1 is committed")


class FaultySink(SluiceDataSource):
    @classmethod
    def name(cls):
        return "sluice_faulty"

    def _raw(self):
        return {k.lower(): v for k, v in self.options.items()}

    def writer(self, schema, overwrite):
        return FaultyWriter(SinkOptions.parse(dict(self.options), schema), self._raw())

    def streamWriter(self, schema, overwrite):
        return FaultyStreamWriter(SinkOptions.parse(dict(self.options), schema), self._raw())


def rows_df(spark, n: int, partitions: int = 2, routed: bool = False, pad: int = 0):
    """``n`` rows: value ``v<i>``; every third row keyless, the others keyed ``k<i % 37>``;
    every fifth row has two headers. ``routed``: binary values, plus a ``topic`` column
    (even rows ``by_column``, odd ``by_column2``) and a ``partition`` column (``i % 4 // 2``
    on ``by_column``, 0 on ``by_column2``). ``pad``: values padded to that many bytes."""
    from pyspark.sql import functions as F

    df = spark.range(0, n, numPartitions=partitions)
    if routed:
        even = F.col("id") % 2 == 0
        return df.select(
            F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
            F.when(even, F.lit("by_column")).otherwise(F.lit("by_column2")).alias("topic"),
            F.when(even, (F.col("id") % 4 / 2).cast("int")).otherwise(F.lit(0)).alias("partition"),
        )
    return df.select(
        F.when(F.col("id") % 3 == 0, F.lit(None).cast("string"))
        .otherwise(F.concat(F.lit("k"), (F.col("id") % 37).cast("string")))
        .alias("key"),
        F.rpad(F.concat(F.lit("v"), F.col("id").cast("string")), pad, "x").alias("value")
        if pad
        else F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.when(
            F.col("id") % 5 == 0,
            F.array(
                F.struct(
                    F.lit("i").alias("key"),
                    F.col("id").cast("string").cast("binary").alias("value"),
                ),
                F.struct(F.lit("n").alias("key"), F.lit(None).cast("binary").alias("value")),
            ),
        ).alias("headers"),
    )


def main(args: dict) -> None:
    from spark.session import get_session

    spark = get_session(
        args.get("master", "local[2,4]"),
        "sluice-sink-scenarios",
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
            "spark.task.maxFailures": "4",
        },
    )
    spark.dataSource.register(FaultySink)
    common = {"bootstrap": args["bootstrap"], "apiKey": args["api_key"]}
    results: dict = {}
    work = Path(args["work"])
    for scenario in args["scenarios"]:
        started = time.monotonic()
        name = scenario["name"]
        summary = work / f"{name}.jsonl"
        opts = {**common, **scenario.get("options", {}), "summaryPath": str(summary)}
        if opts.get("kafka.bootstrap.servers") == "@hostport":  # Kafka's spelling, no scheme
            opts["kafka.bootstrap.servers"] = args["bootstrap"].split("://", 1)[-1]
        if scenario["kind"] == "batch":
            df = rows_df(
                spark,
                scenario["rows"],
                routed=scenario.get("routed", False),
                pad=scenario.get("pad", 0),
            )
            w = df.write.format(scenario.get("format", "sluice_faulty")).mode(
                scenario.get("mode", "append")
            )
            for k, v in opts.items():
                w = w.option(k, str(v))
            try:
                w.save()
                results[name] = {"ok": True}
            except Exception as e:  # the scenario reports it; the test decides
                results[name] = {"ok": False, "error": str(e)[-2000:]}
        elif scenario["kind"] == "stream":
            results[name] = run_stream(spark, scenario, opts, work)
        results[name]["seconds"] = time.monotonic() - started
        if summary.exists():
            results[name]["commits"] = [json.loads(x) for x in summary.read_text().splitlines()]
    Path(args["out"]).write_text(json.dumps(results))
    spark.stop()


def run_stream(spark, scenario: dict, opts: dict, work: Path) -> dict:
    """Three input files, one micro-batch each (availableNow); a failed run is restarted
    from its checkpoint (at most twice)."""
    name = scenario["name"]
    src = work / f"{name}-in"
    src.mkdir(exist_ok=True)
    per_file = scenario["rows"] // 3
    for f in range(3):
        with open(src / f"part-{f}.json", "w") as out:
            for i in range(f * per_file, (f + 1) * per_file):
                key = None if i % 3 == 0 else f"k{i % 37}"
                out.write(json.dumps({"key": key, "value": f"v{i}"}) + "\n")
    opts = {
        **opts,
        "checkpointLocation": str(work / f"{name}-checkpoint"),
        "failCommitMarker": str(work / f"{name}-commit-failed"),
    }
    runs = []
    for _ in range(3):
        df = (
            spark.readStream.schema("key string, value string")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
        )
        w = df.writeStream.format("sluice_faulty").trigger(availableNow=True)
        for k, v in opts.items():
            w = w.option(k, str(v))
        q = w.start()
        try:
            q.awaitTermination(120)
            runs.append("ok")
            break
        except Exception as e:
            runs.append(str(e)[-500:])
    return {"ok": runs[-1] == "ok", "runs": runs}


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
