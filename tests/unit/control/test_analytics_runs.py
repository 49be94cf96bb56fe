"""Runs nobody finishes: a worker killed mid-run leaves its run "running", a lost queue
message leaves one "queued"; both are marked failed as stale, with a clear error."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from backend.analytics import services
from backend.analytics.models import JobRun
from backend.tenancy import roles

from .conftest import key_client

pytestmark = pytest.mark.django_db


def _run(job: str, status: str, age_s: float) -> JobRun:
    at = timezone.now() - timedelta(seconds=age_s)
    run = JobRun.objects.create(job=job, status=status)
    JobRun.objects.filter(pk=run.pk).update(
        queued_at=at, started_at=at if status == "running" else None
    )
    return JobRun.objects.get(pk=run.pk)


@override_settings(SLUICE_ANALYTICS_RUN_TIMEOUT_S=600)
def test_runs_older_than_the_limit_are_marked_stale():
    dead = _run("lag", "running", 601)
    lost = _run("usage", "queued", 700)
    alive = _run("retention", "running", 30)
    waiting = _run("throughput", "queued", 30)
    assert services.runs_expire() == 2
    dead.refresh_from_db()
    lost.refresh_from_db()
    assert dead.status == "failed" and dead.error.startswith("STALE_RUN: still running after 600")
    assert dead.finished_at is not None and dead.duration_s >= 601
    assert lost.status == "failed" and "never started" in lost.error_summary
    assert lost.duration_s is None
    for run in (alive, waiting):
        before = run.status
        run.refresh_from_db()
        assert run.status == before and run.error == ""


@override_settings(SLUICE_ANALYTICS_RUN_TIMEOUT_S=600)
def test_a_stale_queued_run_no_longer_absorbs_requests():
    lost = _run("usage", "queued", 601)
    fresh = services.run_request(job="usage", trigger="schedule", enqueue=False)
    assert fresh.id != lost.id and fresh.status == "queued"


@override_settings(SLUICE_ANALYTICS_RUN_TIMEOUT_S=86400)
def test_a_new_run_of_the_same_job_supersedes_one_left_running(world):
    """The worker runs one job at a time: a new run of a job starting means the earlier one
    still marked running lost its worker. Other jobs' runs are left alone."""
    dead = _run("usage", "running", 60)
    other = _run("lag", "running", 60)
    run = services.run_request(job="usage", trigger="schedule", enqueue=False)
    assert services.run_execute(run.id).status == "succeeded"  # no __usage: nothing to read
    dead.refresh_from_db()
    other.refresh_from_db()
    assert dead.status == "failed" and str(run.id) in dead.error
    assert dead.error.startswith("STALE_RUN: superseded by run")
    assert other.status == "running"
    listed = key_client(world.a.token(roles.READ_ONLY)).get("/api/v1/reports/runs/?job=usage")
    shown = {r["id"]: r for r in listed.json()["results"]}
    assert shown[str(dead.id)]["error"].startswith("stale run: superseded")


def test_the_limit_is_the_setting(settings):
    settings.SLUICE_ANALYTICS_RUN_TIMEOUT_S = 42
    assert services.run_timeout_s() == 42.0
