"""Report rows for the console's browser test, stored through the analytics app's own
``STORE`` services (the functions a finished job calls) into the running stack's database, so
the Reports pages draw real API answers without a Spark job in the test's time budget.

``python -m tests.e2e.seed_reports <organisation slug> <topic>`` with the stack's settings in
the environment; prints one JSON object with what the page should show."""

from __future__ import annotations

import json
import sys
import time


def results_for(tenant: str, topic: str, partitions: int, now_ms: int) -> dict[str, dict]:
    """Job results as each job hands them to ``STORE`` (one organisation, one topic, six
    hours; partition 0 carries most of the traffic, so it is the hot one)."""
    hour, minute = 3_600_000, 60_000
    base = now_ms - now_ms % hour - 5 * hour
    records = {p: (60 if p == 0 else 10) for p in range(partitions)}
    throughput = {
        "hour": [
            {
                "tenant": tenant,
                "ts": base + h * hour,
                "topic": topic,
                "partition": p,
                "records": n * (h + 1),
                "bytes": 200 * n * (h + 1),
            }
            for h in range(6)
            for p, n in records.items()
        ],
        "minute": [
            {
                "tenant": tenant,
                "ts": now_ms - now_ms % minute - m * minute,
                "topic": topic,
                "partition": p,
                "records": n,
                "bytes": 200 * n,
            }
            for m in range(5)
            for p, n in records.items()
        ],
        "peaks": [
            {
                "tenant": tenant,
                "topic": topic,
                "peak_ts": base + 5 * hour,
                "peak_records": 4321,
                "peak_bytes": 864_200,
                "mean_records": 1234.5,
            }
        ],
        "skew": [
            {
                "tenant": tenant,
                "ts": base + h * hour,
                "topic": topic,
                "busiest_partition": 0,
                "max_share": records[0] / sum(records.values()),
                "skew": records[0] / sum(records.values()) * partitions,
                "hot_partition": 0
                if records[0] / sum(records.values()) * partitions >= 2
                else None,
            }
            for h in range(6)
        ],
    }
    lag = {
        "history": [
            {
                "tenant": tenant,
                "ts_ms": base + h * hour,
                "group": "e2e-report-readers",
                "topic": topic,
                "partition": 0,
                "committed_offset": 100 * h,
                "log_end_offset": 100 * h + 40 * h,
                "offset_lag": 40 * h,
                "time_lag_ms": 1000 * h,
                "status": "WARN" if h > 3 else "OK",
            }
            for h in range(6)
        ],
        "status": [],
    }
    retention = {
        "partitions": [
            {
                "tenant": tenant,
                "topic": topic,
                "partition": p,
                "bytes": 1_000_000 * (p + 1),
                "segments": p + 1,
                "oldest_ts": base,
                **{
                    f"delete_{h}h_{u}": (250_000 * (p + 1) if h == 24 else 0)
                    for h in (1, 6, 24)
                    for u in ("bytes", "records")
                },
            }
            for p in range(partitions)
        ],
        "storage": [{"tenant": tenant, "topic": topic, "ts": now_ms, "bytes": 3_000_000}],
        "compaction": [
            {
                "tenant": tenant,
                "topic": topic,
                "partition": p,
                "records": 40,
                "distinct_keys": 10,
                "tombstones": 3,
                "keyless": 1,
                "effectiveness": 0.25,
            }
            for p in range(partitions)
        ],
    }
    usage = {
        "hour": [
            {
                "tenant": tenant,
                "ts": base + h * hour,
                "service_account": "demo-app",
                "topic": topic,
                "storage_gb_hours": 0.003,
                "bytes_in": 50_000 * (h + 1),
                "bytes_out": 20_000 * (h + 1),
                "records_in": 250 * (h + 1),
                "records_out": 100 * (h + 1),
                "requests": 40,
                "throttle_ms": 0,
            }
            for h in range(6)
        ],
        "day": [],
    }
    return {"throughput": throughput, "lag": lag, "retention": retention, "usage": usage}


def main(slug: str, topic_name: str) -> dict:
    import django

    django.setup()
    from django.db import transaction
    from django.utils import timezone

    from backend.analytics import services
    from backend.tenancy.models import Organisation
    from backend.topics.models import Topic

    org = Organisation.objects.get(slug=slug)
    topic = Topic.objects.get(organisation=org, name=topic_name)
    now_ms = int(time.time() * 1000)
    written = {}
    for job, results in results_for(str(org.id), topic.name, topic.partitions, now_ms).items():
        run = services.run_request(job=job, trigger="manual", enqueue=False)
        with transaction.atomic():
            run.status, run.started_at = "running", timezone.now()
            run.rows_written = services.STORE[job](run, results)
            run.status, run.finished_at, run.duration_s = "succeeded", timezone.now(), 0.1
            run.save()
        written[job] = run.rows_written
    return {"topic": topic.name, "peak_records": 4321, "hot_partition": 0, "written": written}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
