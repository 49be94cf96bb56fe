"""The reports API (/api/v1/reports/...): tenant isolation, roles, runs recorded and audited,
and the services that store a job's rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from backend.analytics import services
from backend.analytics.models import (
    CompactionRow,
    JobRun,
    LagRow,
    RetentionRow,
    SkewRow,
    ThroughputPeak,
    ThroughputRow,
    UsageRow,
)
from backend.audit.models import AuditEvent
from backend.tenancy import roles

from .conftest import key_client

NOW = timezone.now().replace(microsecond=0)


def _lag_results(world) -> dict:
    ms = int(NOW.timestamp() * 1000)
    rows = []
    for t, group in ((world.a, "a-group"), (world.b, "b-group")):
        rows.append(
            {
                "tenant": str(t.org.id),
                "group": group,
                "topic": t.topic.name,
                "partition": 0,
                "ts_ms": ms - 60_000,
                "committed_offset": 5,
                "log_end_offset": 9,
                "offset_lag": 4,
                "time_lag_ms": 1500,
                "status": "WARN",
            }
        )
    status = [
        {
            **r,
            "sampled_ms": r["ts_ms"],
            "catch_up_s": None,
            "retention_risk": True,
            "status": "STOP",
        }
        for r in rows
    ]
    return {"history": rows, "status": status}


def _stored(world) -> None:
    run = JobRun.objects.create(job="lag")
    assert services.store_lag(run, _lag_results(world)) == 4
    hour = NOW.replace(minute=0, second=0)
    services.store_throughput(
        run,
        {
            "minute": [
                {
                    "tenant": str(t.org.id),
                    "topic": t.topic.name,
                    "partition": 1,
                    "ts": hour,
                    "records": 10,
                    "bytes": 100,
                }
                for t in (world.a, world.b)
            ],
            "hour": [],
            "peaks": [
                {
                    "tenant": str(t.org.id),
                    "topic": t.topic.name,
                    "peak_ts": hour,
                    "peak_records": 10,
                    "peak_bytes": 100,
                    "mean_records": 7.5,
                }
                for t in (world.a, world.b)
            ],
            "skew": [
                {
                    "tenant": str(t.org.id),
                    "topic": t.topic.name,
                    "ts": hour - timedelta(hours=h),
                    "busiest_partition": 1,
                    "max_share": share,
                    "skew": share * 4,
                    "hot_partition": 1 if share * 4 >= 2 else None,
                }
                for t in (world.a, world.b)
                for h, share in ((0, 0.75), (2, 0.25))
            ],
        },
    )
    services.store_retention(
        run,
        {
            "partitions": [
                {
                    "tenant": str(t.org.id),
                    "topic": t.topic.name,
                    "partition": 0,
                    "bytes": 1000,
                    "segments": 3,
                    "oldest_ts": hour,
                    **{f"delete_{h}h_{u}": 7 for h in (1, 6, 24) for u in ("bytes", "records")},
                }
                for t in (world.a, world.b)
            ],
            "storage": [],
            "compaction": [
                {
                    "tenant": str(t.org.id),
                    "topic": t.topic.name,
                    "partition": 0,
                    "records": 40,
                    "distinct_keys": 10,
                    "tombstones": 3,
                    "keyless": 1,
                    "effectiveness": 0.25,
                }
                for t in (world.a, world.b)
            ],
        },
    )
    services.store_usage(
        run,
        {
            "hour": [
                {
                    "tenant": str(t.org.id),
                    "service_account": t.accounts[roles.MEMBER].name,
                    "topic": t.topic.name,
                    "ts": hour,
                    "bytes_in": 11,
                    "bytes_out": 22,
                    "records_in": 1,
                    "records_out": 2,
                    "requests": 3,
                    "throttle_ms": 4,
                    "storage_gb_hours": 0.5,
                }
                for t in (world.a, world.b)
            ],
            "day": [],
            "quotas": [
                {
                    "tenant": str(t.org.id),
                    "service_account": t.accounts[roles.MEMBER].name,
                    "minutes": 30,
                    "p99_produce_bytes_per_sec": 100.0,
                    "p99_fetch_bytes_per_sec": 200.0,
                    "p99_requests_per_sec": 0.5,
                    "produce_bytes_per_sec": 150,
                    "fetch_bytes_per_sec": 300,
                    "request_rate": 1,
                }
                for t in (world.a, world.b)
            ],
        },
    )


@pytest.mark.parametrize(
    "path",
    [
        "reports/lag/",
        "reports/throughput/",
        "reports/retention/",
        "reports/usage/",
        "reports/peaks/",
        "reports/skew/",
        "reports/compaction/",
    ],
)
def test_each_tenant_sees_its_own_rows_only(world, path):
    _stored(world)
    for me, other in ((world.a, world.b), (world.b, world.a)):
        r = key_client(me.token(roles.READ_ONLY)).get(f"/api/v1/{path}")
        assert r.status_code == 200, r.content
        rows = r.json()["rows"]
        assert rows and all(row["topic"] == me.topic.name for row in rows)
        text = r.content.decode()
        assert other.topic.name not in text and str(other.org.id) not in text


def test_report_shapes_follow_the_console_contract(world):
    _stored(world)
    c = key_client(world.a.token(roles.READ_ONLY))
    (lag,) = c.get("/api/v1/reports/lag/?group=a-group&hours=2").json()["rows"]
    assert set(lag) == {
        "ts",
        "group_id",
        "topic",
        "partition",
        "offset_lag",
        "time_lag_ms",
        "status",
    }
    assert (lag["offset_lag"], lag["time_lag_ms"], lag["status"]) == (4, 1500, "WARN")
    assert c.get("/api/v1/reports/lag/?group=nope").json()["rows"] == []
    current = c.get("/api/v1/reports/lag/").json()["current"]
    assert [(x["status"], x["retention_risk"]) for x in current] == [("STOP", True)]
    (tp,) = c.get("/api/v1/reports/throughput/?granularity=minute&hours=2").json()["rows"]
    assert set(tp) == {"ts", "topic", "partition", "records", "bytes"}
    assert c.get("/api/v1/reports/throughput/?granularity=hour").json()["rows"] == []
    (ret,) = c.get("/api/v1/reports/retention/").json()["rows"]
    assert {
        "topic",
        "partition",
        "bytes",
        "segments",
        "oldest_ts",
        "delete_1h_bytes",
        "delete_6h_bytes",
        "delete_24h_bytes",
    } <= set(ret)
    (use,) = c.get("/api/v1/reports/usage/?granularity=hour&days=1").json()["rows"]
    assert {
        "ts",
        "service_account",
        "topic",
        "bytes_in",
        "bytes_out",
        "storage_gb_hours",
        "requests",
        "throttle_ms",
    } <= set(use)
    assert use["storage_gb_hours"] == 0.5
    (suggestion,) = c.get("/api/v1/reports/usage/").json()["quota_suggestions"]
    assert suggestion["service_account"] == world.a.accounts[roles.MEMBER].name
    assert (suggestion["produce_bytes_per_sec"], suggestion["request_rate"]) == (150, 1)
    r = c.get("/api/v1/reports/usage/?granularity=week")
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"


def test_peaks_skew_and_compaction_shapes(world):
    _stored(world)
    c = key_client(world.a.token(roles.READ_ONLY))
    (peak,) = c.get("/api/v1/reports/peaks/").json()["rows"]
    assert set(peak) == {"topic", "peak_ts", "peak_records", "peak_bytes", "mean_records"}
    assert (peak["topic"], peak["peak_records"], peak["mean_records"]) == (
        world.a.topic.name,
        10,
        7.5,
    )
    assert c.get("/api/v1/reports/peaks/?topic=other").json()["rows"] == []
    skew = c.get("/api/v1/reports/skew/?hours=3").json()["rows"]
    assert [set(r) for r in skew] == [
        {"ts", "topic", "busiest_partition", "max_share", "skew", "hot_partition"}
    ] * 2
    assert [(r["skew"], r["hot_partition"]) for r in skew] == [(1.0, None), (3.0, 1)]
    (hot,) = c.get("/api/v1/reports/skew/?hot_only=true&hours=3").json()["rows"]
    assert hot["hot_partition"] == 1 and hot["max_share"] == 0.75
    assert len(c.get("/api/v1/reports/skew/?hours=1.01").json()["rows"]) == 1
    (comp,) = c.get(f"/api/v1/reports/compaction/?topic={world.a.topic.name}").json()["rows"]
    assert comp == {
        "topic": world.a.topic.name,
        "partition": 0,
        "records": 40,
        "distinct_keys": 10,
        "tombstones": 3,
        "keyless": 1,
        "effectiveness": 0.25,
    }
    r = c.get("/api/v1/reports/skew/?hot_only=maybe")
    assert r.status_code == 400 and "hot_only" in r.json()["fields"]
    r = c.get("/api/v1/reports/peaks/?granularity=hour")
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"


def test_later_runs_replace_peaks_and_compaction_and_upsert_skew(world):
    _stored(world)
    run = JobRun.objects.create(job="throughput")
    services.store_throughput(run, {"minute": [], "hour": [], "peaks": [], "skew": []})
    assert not ThroughputPeak.objects.exists()  # no traffic in the look-back: no peak
    assert SkewRow.objects.count() == 4  # hours already measured stay
    services.store_retention(run, {"partitions": [], "storage": [], "compaction": []})
    assert not CompactionRow.objects.exists()  # no compacted topic any more


def test_rows_are_upserted_by_their_natural_key(world):
    _stored(world)
    _stored(world)
    assert LagRow.objects.filter(organisation=world.a.org).count() == 2  # a sample + now
    assert ThroughputRow.objects.filter(organisation=world.a.org).count() == 1
    assert UsageRow.objects.filter(organisation=world.a.org).count() == 1
    assert RetentionRow.objects.filter(organisation=world.a.org).count() == 1
    assert ThroughputPeak.objects.filter(organisation=world.a.org).count() == 1
    assert SkewRow.objects.filter(organisation=world.a.org).count() == 2
    assert CompactionRow.objects.filter(organisation=world.a.org).count() == 1


def test_rows_of_unknown_tenants_are_dropped(world):
    run = JobRun.objects.create(job="lag")
    results = _lag_results(world)
    for r in results["history"] + results["status"]:
        r["tenant"] = "not-an-organisation"
    assert services.store_lag(run, results) == 0


def test_admins_queue_runs_others_may_not(world):
    for role in (roles.MEMBER, roles.READ_ONLY):
        r = key_client(world.a.token(role)).post(
            "/api/v1/reports/runs/", {"job": "lag"}, format="json"
        )
        assert r.status_code == 403 and r.json()["error_code"] == "PERMISSION_DENIED"
    admin = key_client(world.a.token(roles.ADMIN))
    r = admin.post("/api/v1/reports/runs/", {"job": "lag"}, format="json")
    assert r.status_code == 202, r.content
    run = r.json()
    assert (run["job"], run["status"], run["error"]) == ("lag", "queued", None)
    again = admin.post("/api/v1/reports/runs/", {"job": "lag"}, format="json").json()
    assert again["id"] == run["id"]  # one queued run per job
    event = AuditEvent.objects.get(action="report_run.request")
    assert event.organisation == world.a.org and event.object_id == run["id"]
    r = admin.post("/api/v1/reports/runs/", {"job": "everything"}, format="json")
    assert r.status_code == 400 and "job" in r.json()["fields"]


def test_a_run_records_status_duration_and_errors(world):
    """No broker is live here: the throughput job fails for real and says so; tenants see
    the summary, not the operators' error text."""
    run = services.run_request(job="throughput", ctx=None, trigger="schedule", enqueue=False)
    run = services.run_execute(run.id)
    assert run.status == "failed"
    assert "no live broker" in run.error
    assert run.duration_s is not None and run.duration_s >= 0
    assert run.started_at <= run.finished_at
    listed = key_client(world.b.token(roles.READ_ONLY)).get("/api/v1/reports/runs/").json()
    (shown,) = listed["results"]
    assert shown["status"] == "failed" and "no live broker" not in shown["error"]
    assert "RuntimeError" in shown["error"] and str(run.id) in shown["error"]
    # the usage job without the __usage topic has nothing to read: it succeeds, 0 rows
    usage = services.run_execute(services.run_request(job="usage", enqueue=False).id)
    assert (usage.status, usage.rows_written, usage.error) == ("succeeded", 0, "")
    assert services.run_execute(usage.id).finished_at == usage.finished_at  # runs once


def test_runs_listed_newest_first_with_a_limit(world):
    for job in ("lag", "usage", "retention"):
        JobRun.objects.create(job=job, queued_at=NOW - timedelta(minutes=1))
    c = key_client(world.a.token(roles.READ_ONLY))
    jobs = [r["job"] for r in c.get("/api/v1/reports/runs/?limit=2").json()["results"]]
    assert len(jobs) == 2
    assert [r["job"] for r in c.get("/api/v1/reports/runs/?job=usage").json()["results"]] == [
        "usage"
    ]


def test_celery_schedule_parsing():
    from backend.celery import parse_schedule

    assert parse_schedule("lag=300, usage=3600") == {"lag": 300.0, "usage": 3600.0}
    assert parse_schedule("") == {}
    with pytest.raises(ValueError):
        parse_schedule("lag")
    with pytest.raises(ValueError):
        parse_schedule("lag=-1")


def test_utc_conversion_of_spark_timestamps():
    from backend.analytics.runner import utc

    aware = datetime(2026, 1, 1, tzinfo=UTC)
    assert utc(aware) == aware
    assert utc(1767225600000) == aware
    assert utc(datetime.fromtimestamp(1767225600)) == aware  # naive local, as PySpark gives
