"""The retention report says when its sizes were measured (``as_of``: the run's finish), and
null before any run, so the console shows "not measured yet" rather than 0 B."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from backend.analytics import services
from backend.analytics.models import JobRun
from backend.tenancy import roles

from .conftest import key_client


def _row(tenant, topic: str) -> dict:
    return {
        "tenant": str(tenant.org.id),
        "topic": topic,
        "partition": 0,
        "bytes": 4096,
        "segments": 1,
        "oldest_ts": None,
        **{f"delete_{h}h_{u}": 0 for h in (1, 6, 24) for u in ("bytes", "records")},
    }


def test_retention_report_as_of_is_the_runs_finish_and_null_before_any(world):
    c = key_client(world.a.token(roles.READ_ONLY))
    before = c.get("/api/v1/reports/retention/").json()
    assert before == {"rows": [], "as_of": None}
    finished = timezone.now() - timedelta(minutes=7)
    run = JobRun.objects.create(job="retention", status="succeeded", finished_at=finished)
    services.store_retention(
        run, {"partitions": [_row(world.a, world.a.topic.name), _row(world.b, world.b.topic.name)]}
    )
    body = c.get("/api/v1/reports/retention/").json()
    assert [r["bytes"] for r in body["rows"]] == [4096]
    assert body["as_of"] == finished.isoformat().replace("+00:00", "Z")
