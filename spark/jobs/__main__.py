"""Run a job from the command line and print its rows as JSON (for operators and tests):

    python -m spark.jobs lag --bootstrap http://127.0.0.1:9092 --api-key K --topic orders
    SPARK_MASTER=spark://host:7077 python -m spark.jobs throughput --cluster-secret S ...

``--topic`` takes ``name`` or ``name@tenant`` and may repeat; ``SPARK_MASTER`` (default
``local[*]``) picks where Spark runs. ``live`` runs the live analytics job
(``spark.jobs.live``: lag samples of the ``--topic`` topics and throughput per minute as JSON
lines) until Ctrl-C, or once over what is there with ``--available-now``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime

from spark.jobs.common import Source, TopicRef


def _ref(spec: str) -> TopicRef:
    name, _, tenant = spec.partition("@")
    return TopicRef(name, tenant)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark.jobs", description=__doc__.split("\n")[0])
    p.add_argument("job", choices=["lag", "throughput", "retention", "usage", "live"])
    p.add_argument("--bootstrap", required=True)
    auth = p.add_mutually_exclusive_group(required=True)
    auth.add_argument("--api-key")
    auth.add_argument("--cluster-secret")
    p.add_argument("--topic", action="append", default=[], type=_ref)
    p.add_argument("--offsets-topic", default="__consumer_offsets", type=_ref)
    p.add_argument("--usage-topic", default="__usage", type=_ref)
    p.add_argument("--now-ms", type=int, default=None)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--min-stop-ms", type=int, default=60_000)
    p.add_argument("--checkpoint", default="var/analytics-live-cli", help="live: its checkpoint")
    p.add_argument("--available-now", action="store_true", help="live: one bounded run")
    a = p.parse_args(argv)

    from spark.session import get_session

    spark = get_session(app_name=f"sluice-{a.job}")
    source = Source(a.bootstrap, api_key=a.api_key, cluster_secret=a.cluster_secret)
    now_ms = a.now_ms or int(time.time() * 1000)
    if a.job == "live":
        return _live(spark, source, a)
    if a.job == "lag":
        from spark.jobs import lag

        out = lag.run(
            spark,
            source,
            a.topic,
            a.offsets_topic,
            now_ms=now_ms,
            window=a.window,
            min_stop_ms=a.min_stop_ms,
        )
    elif a.job == "throughput":
        from spark.jobs import throughput

        out = throughput.run(spark, source, a.topic)
    elif a.job == "retention":
        from spark.jobs import retention

        out = retention.run(spark, source, a.topic, now_ms=now_ms)
    else:
        from spark.jobs import usage

        out = usage.run(spark, source, a.usage_topic)
    out["master"] = spark.sparkContext.master
    json.dump(
        out, sys.stdout, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)
    )
    sys.stdout.write("\n")
    spark.stop()
    return 0


def _live(spark, source: Source, a: argparse.Namespace) -> int:
    import threading

    from spark.jobs import live

    job = live.LiveJob(
        spark,
        source,
        offsets_topic=a.offsets_topic,
        usage_topic=a.usage_topic,
        topics=lambda: a.topic,
        sink=live.JsonLinesSink(sys.stdout),
        config=live.LiveConfig(a.checkpoint),
    )
    try:
        if a.available_now:
            job.run_available_now()
        else:
            job.run(threading.Event())
    except KeyboardInterrupt:
        pass
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
