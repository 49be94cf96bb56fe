"""Three hours of live-series history for the charts' browser test, handed to
``ControlPlaneSink`` (what the live job and, through the same tables, the control plane's
sampler write), so the overview, a topic's throughput tab and a group's lag chart have
history when they open.

``python -m tests.e2e.seed_history <organisation slug> <topic> <group>`` with the stack's
settings in the environment; prints one JSON object: the minutes seeded and their totals."""

from __future__ import annotations

import json
import sys
import time

HOURS = 3


def rows_for(tenant: str, topic: str, group: str, now_ms: int) -> tuple[list, list, int]:
    """Per minute over ``HOURS``: records in rising and falling (a visible shape), out at
    half of in; the group's lag stepping up each hour. Every third minute of the lag is
    missing (a gap the chart carries forward, not a drop to 0)."""
    minute = 60_000
    last = now_ms - now_ms % minute - minute  # the last whole minute
    minutes = [last - m * minute for m in range(HOURS * 60)][::-1]
    usage = [
        {
            "tenant": tenant,
            "topic": topic,
            "minute_ms": m,
            "records_in": 100 + (i % 60) * 10,
            "bytes_in": 200 * (100 + (i % 60) * 10),
            "records_out": 50 + (i % 60) * 5,
            "bytes_out": 100 * (100 + (i % 60) * 10),
        }
        for i, m in enumerate(minutes)
    ]
    lag = [
        {
            "tenant": tenant,
            "group": group,
            "topic": topic,
            "minute_ms": m,
            "sampled_ms": m + 30_000,
            "offset_lag": 100 * (1 + i // 60),
            "partitions": 1,
            "measured": 1,
            "topic_partitions": 1,
        }
        for i, m in enumerate(minutes)
        if i % 3 != 2
    ]
    return usage, lag, minutes[0]


def main(slug: str, topic: str, group: str) -> dict:
    import django

    django.setup()
    from backend.analytics.live_services import ControlPlaneSink
    from backend.tenancy.models import Organisation

    org = Organisation.objects.get(slug=slug)
    now_ms = int(time.time() * 1000)
    usage, lag, first = rows_for(str(org.id), topic, group, now_ms)
    sink = ControlPlaneSink()
    sink.throughput(usage, measured_from_ms=first, as_of_ms=now_ms)
    for r in lag:  # one sample per minute, as the live job takes them
        sink.lag([], [r], sampled_ms=r["sampled_ms"])
    return {
        "minutes": len(usage),
        "lag_samples": len(lag),
        "records_in": sum(r["records_in"] for r in usage),
        "last_lag": lag[-1]["offset_lag"],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3])))
