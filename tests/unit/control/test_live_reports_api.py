"""The live series (/api/v1/reports/live/...) and the sink the live job writes through:
"not measured yet" as nulls, upserts by key (a batch written twice stores the same rows),
retention trimming, ``since``/``group``/``topic`` filters and tenant isolation."""

from __future__ import annotations

from django.utils import timezone

from backend.analytics import live_services
from backend.analytics.models import LiveLagMinute, LiveThroughputMinute
from backend.tenancy import roles

from .conftest import key_client

NOW_MS = int(timezone.now().timestamp() * 1000)
MINUTE = NOW_MS - NOW_MS % 60_000


def _lag(world, sampled_ms: int, lag: int | None) -> tuple[list[dict], list[dict]]:
    parts, groups = [], []
    for t in (world.a, world.b):
        base = {"tenant": str(t.org.id), "group": "g", "topic": t.topic.name}
        minute = sampled_ms - sampled_ms % 60_000
        parts.append(
            {
                **base,
                "partition": 0,
                "minute_ms": minute,
                "sampled_ms": sampled_ms,
                "committed_offset": 5,
                "commit_ms": sampled_ms - 1000,
                "log_end_offset": None if lag is None else 5 + lag,
                "offset_lag": lag,
            }
        )
        groups.append(
            {
                **base,
                "minute_ms": minute,
                "sampled_ms": sampled_ms,
                "offset_lag": lag,
                "partitions": 1,
                "measured": 0 if lag is None else 1,
                "topic_partitions": 1,
            }
        )
    return parts, groups


def _usage(world, minute_ms: int, records: int) -> list[dict]:
    return [
        {
            "tenant": str(t.org.id),
            "topic": t.topic.name,
            "minute_ms": minute_ms,
            "records_in": records,
            "bytes_in": records * 10,
            "records_out": 2 * records,
            "bytes_out": 20 * records,
        }
        for t in (world.a, world.b)
    ]


def _get(world, path: str, tenant=None) -> dict:
    t = tenant or world.a
    resp = key_client(t.token(roles.READ_ONLY)).get(f"/api/v1/reports/live/{path}")
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_not_measured_yet_is_null_not_zero(world):
    topic = world.a.topic.name
    lag = _get(world, f"lag/?group=g&topic={topic}")
    assert (lag["as_of"], lag["measured_from"], lag["rows"]) == (None, None, [])
    assert lag["current"] == [{"group_id": "g", "topic": topic, "offset_lag": None, "ts": None}]
    tp = _get(world, f"throughput/?topic={topic}")
    assert tp["as_of"] is None and tp["rows"] == []
    assert tp["totals"] == [
        {
            "topic": topic,
            "records_in": None,
            "bytes_in": None,
            "records_out": None,
            "bytes_out": None,
        }
    ]


def test_lag_minutes_upserted_and_served_to_their_tenant_only(world):
    sink = live_services.ControlPlaneSink()
    first = MINUTE - 120_000 + 5_000  # minute-aligned: first + 10 s is the same minute
    sink.lag(*_lag(world, first, 3), sampled_ms=first)
    sink.lag(*_lag(world, first + 10_000, 4), sampled_ms=first + 10_000)  # same minute: wins
    sink.lag(*_lag(world, first + 10_000, 4), sampled_ms=first + 10_000)  # written twice
    sink.lag(*_lag(world, NOW_MS, None), sampled_ms=NOW_MS)  # log end not sampled
    assert LiveLagMinute.objects.filter(organisation=world.a.org).count() == 2
    topic = world.a.topic.name
    doc = _get(world, "lag/?partitions=true")
    assert [(r["offset_lag"], r["measured"]) for r in doc["rows"]] == [(4, 1), (None, 0)]
    assert {r["topic"] for r in doc["rows"]} == {topic}
    assert doc["current"] == [
        {"group_id": "g", "topic": topic, "offset_lag": None, "ts": doc["rows"][-1]["ts"]}
    ]
    assert [p["log_end_offset"] for p in doc["partitions"]] == [9, None]
    assert doc["measured_from"] <= doc["rows"][0]["ts"] <= doc["as_of"]
    # filters: another group, a time after the first minute
    assert _get(world, "lag/?group=other")["rows"] == []
    since = doc["rows"][-1]["ts"]  # the last minute's
    assert len(_get(world, f"lag/?since={since}")["rows"]) == 1
    b = _get(world, "lag/", tenant=world.b)
    assert {r["topic"] for r in b["rows"]} == {world.b.topic.name}


def test_throughput_minutes_are_absolute_totals_upserted(world):
    sink = live_services.ControlPlaneSink()
    old = MINUTE - 2 * 60_000
    sink.throughput(_usage(world, old, 5), measured_from_ms=old - 60_000, as_of_ms=NOW_MS)
    sink.throughput(_usage(world, old, 7), measured_from_ms=old - 60_000, as_of_ms=NOW_MS)
    sink.throughput(_usage(world, MINUTE, 1), measured_from_ms=old - 60_000, as_of_ms=NOW_MS)
    topic = world.a.topic.name
    doc = _get(world, f"throughput/?topic={topic}")
    assert [r["records_in"] for r in doc["rows"]] == [7, 1]
    assert doc["totals"] == [
        {"topic": topic, "records_in": 8, "bytes_in": 80, "records_out": 16, "bytes_out": 160}
    ]
    # measured, no traffic: zeros
    idle = _get(world, "throughput/?topic=idle")
    assert idle["totals"][0]["records_in"] == 0
    assert {r["topic"] for r in _get(world, "throughput/", tenant=world.b)["rows"]} == {
        world.b.topic.name
    }


def test_rows_older_than_the_retention_are_trimmed(world, settings):
    settings.SLUICE_ANALYTICS_LIVE_RETENTION_H = 1
    sink = live_services.ControlPlaneSink()
    sink.throughput(_usage(world, MINUTE, 5), measured_from_ms=0, as_of_ms=NOW_MS)  # trims
    # a late write of an old minute: the sink trims at most once a minute
    sink.throughput(_usage(world, MINUTE - 2 * 3_600_000, 5), measured_from_ms=0, as_of_ms=NOW_MS)
    assert LiveThroughputMinute.objects.count() == 4
    assert live_services.trim() == 2  # both tenants' old minute
    assert LiveThroughputMinute.objects.count() == 2
    # and the API never reaches past the retention window
    doc = _get(world, "throughput/?since=2000-01-01T00:00:00Z")
    assert len(doc["rows"]) == 1


def test_bad_since_is_a_400_naming_it(world):
    resp = key_client(world.a.token(roles.READ_ONLY)).get("/api/v1/reports/live/lag/?since=soon")
    assert resp.status_code == 400
    assert "since" in resp.json()["message"] or "since" in str(resp.json())
