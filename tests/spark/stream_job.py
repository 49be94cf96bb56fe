"""A streaming query as a separate driver process (``SPARK_MASTER`` picks the cluster):
``readStream.format("sluice")`` with ``Trigger.AvailableNow`` into a Parquet file sink, then
the sink's committed output read back. Prints one JSON line: the master, the micro-batches'
sizes and every ``(partition, offset, value)`` written.

``python -m tests.spark.stream_job BOOTSTRAP API_KEY TOPIC OUT_DIR MAX_OFFSETS_PER_TRIGGER``
"""

from __future__ import annotations

import json
import sys

from spark.session import get_session

TIMEOUT_S = 180


def main(bootstrap: str, api_key: str, topic: str, out: str, max_per_trigger: str) -> None:
    spark = get_session(app_name="sluice-stream-test")
    df = (
        spark.readStream.format("sluice")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("apiKey", api_key)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_trigger)
        .load()
        .selectExpr("partition", "offset", "cast(value as string) as value")
    )
    q = (
        df.writeStream.format("parquet")
        .option("path", f"{out}/data")
        .option("checkpointLocation", f"{out}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    if not q.awaitTermination(TIMEOUT_S):
        q.stop()
        raise SystemExit(f"the query did not finish within {TIMEOUT_S}s")
    batches = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    rows = [tuple(r) for r in spark.read.parquet(f"{out}/data").collect()]
    master = spark.sparkContext.master
    spark.stop()
    print(json.dumps({"master": master, "batches": batches, "rows": sorted(rows)}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
