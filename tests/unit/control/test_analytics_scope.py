"""Who may run the analytics over whom, and one tenant's bad data or failure never costs
another tenant its report: a tenant admin runs its own organisation's jobs only, operators
the cluster-wide ones; a cluster-wide run that fails is run per tenant; what a run skipped
for a tenant (unreadable batches, its share failing) is stored, logged and shown to it."""

from __future__ import annotations

import logging

from django.utils import timezone
from rest_framework.test import APIClient

from backend.analytics import runner, services
from backend.analytics.models import JobRun, RunProblem, ThroughputPeak, ThroughputRow
from backend.tenancy import roles
from backend.tenancy.models import Membership

from .conftest import key_client

NOW = timezone.now().replace(second=0, microsecond=0)


def _throughput(org) -> dict:
    tenant = str(org.id)
    return {
        "minute": [
            {
                "tenant": tenant,
                "topic": "orders",
                "partition": 0,
                "ts": NOW,
                "records": 7,
                "bytes": 70,
            }
        ],
        "hour": [],
        "peaks": [
            {
                "tenant": tenant,
                "topic": "orders",
                "peak_ts": NOW,
                "peak_records": 7,
                "peak_bytes": 70,
                "mean_records": 7.0,
            }
        ],
        "skew": [],
        "unreadable": [],
    }


def test_a_tenant_admin_cannot_queue_a_cluster_wide_run(world):
    admin = key_client(world.a.token(roles.ADMIN))
    r = admin.post("/api/v1/reports/runs/", {"job": "lag", "scope": "cluster"}, format="json")
    assert r.status_code == 403, r.content
    assert r.json()["error_code"] == "OPERATOR_REQUIRED"
    assert "organisation" in r.json()["message"]
    assert not JobRun.objects.exists()


def test_a_tenant_admin_runs_its_own_organisations_job(world):
    admin = key_client(world.a.token(roles.ADMIN))
    r = admin.post("/api/v1/reports/runs/", {"job": "throughput"}, format="json")
    assert r.status_code == 202, r.content
    assert r.json()["scope"] == "organisation"
    run = JobRun.objects.get(pk=r.json()["id"])
    assert run.organisation == world.a.org
    # the other tenant never sees it; both see cluster-wide runs
    cluster = services.run_request(job="throughput", enqueue=False)
    seen_by_b = key_client(world.b.token(roles.READ_ONLY)).get("/api/v1/reports/runs/").json()
    assert [x["id"] for x in seen_by_b["results"]] == [str(cluster.id)]
    seen_by_a = admin.get("/api/v1/reports/runs/").json()["results"]
    assert {x["id"] for x in seen_by_a} == {str(cluster.id), str(run.id)}


def test_an_operator_queues_cluster_wide_runs(world):
    Membership.objects.create(organisation=world.a.org, user=world.staff, role=roles.ADMIN)
    client = APIClient()
    client.force_authenticate(user=world.staff)
    r = client.post(
        "/api/v1/reports/runs/",
        {"job": "lag", "scope": "cluster"},
        format="json",
        HTTP_X_SLUICE_ORGANISATION=world.a.org.slug,
    )
    assert r.status_code == 202, r.content
    assert r.json()["scope"] == "cluster"
    assert JobRun.objects.get(pk=r.json()["id"]).organisation is None


def test_a_tenant_run_reads_and_replaces_that_tenant_only(world, monkeypatch):
    asked = []

    def run_job(job, *, organisation_id=None):
        asked.append((job, organisation_id))
        return _throughput(world.a.org)

    monkeypatch.setattr(runner, "run_job", run_job)
    older = services.run_request(job="throughput", enqueue=False)
    ThroughputPeak.objects.create(
        organisation=world.b.org,
        run=older,
        topic="b-topic",
        peak_ts=NOW,
        peak_records=1,
        peak_bytes=1,
        mean_records=1.0,
    )
    r = key_client(world.a.token(roles.ADMIN)).post(
        "/api/v1/reports/runs/", {"job": "throughput"}, format="json"
    )
    run = JobRun.objects.get(pk=r.json()["id"])
    run = services.run_execute(run.id)
    assert run.status == "succeeded", run.error
    assert asked == [("throughput", world.a.org.id)]
    assert ThroughputPeak.objects.filter(organisation=world.b.org).count() == 1  # kept
    assert ThroughputPeak.objects.filter(organisation=world.a.org).count() == 1


def test_one_tenants_failure_never_fails_anothers_report(world, monkeypatch, caplog):
    a, b = str(world.a.org.id), str(world.b.org.id)

    def run_job(job, *, organisation_id=None):
        if organisation_id is None or str(organisation_id) == b:
            raise ValueError("year 292278994 is out of range")  # what bravo's data did
        out = _throughput(world.a.org)
        out["unreadable"] = [
            {
                "tenant": a,
                "topic": "alpha-orders",
                "partition": 1,
                "offset": off,
                "reason": "CORRUPT_MESSAGE: varint at byte 0 is too big",
            }
            for off in (40, 90)
        ]
        return out

    monkeypatch.setattr(runner, "run_job", run_job)
    run = services.run_request(job="throughput", enqueue=False)
    with caplog.at_level(logging.WARNING, logger="sluice.analytics"):
        run = services.run_execute(run.id)
    assert run.status == "succeeded"
    assert "ValueError" in run.error and b in run.error  # operators learn who failed
    assert ThroughputRow.objects.filter(organisation=world.a.org).count() == 1
    assert not ThroughputRow.objects.filter(organisation=world.b.org).exists()
    assert RunProblem.objects.filter(run=run, organisation=world.a.org).count() == 2
    assert any(
        "2 unreadable batches" in m and a in m and "alpha-orders-1" in m for m in caplog.messages
    )

    (mine,) = (
        key_client(world.a.token(roles.READ_ONLY)).get("/api/v1/reports/runs/").json()["results"]
    )
    assert mine["status"] == "succeeded" and mine["unreadable_batches"] == 2
    assert [(p["kind"], p["offset"]) for p in mine["problems"]] == [
        ("unreadable_batch", 40),
        ("unreadable_batch", 90),
    ]
    (theirs,) = (
        key_client(world.b.token(roles.READ_ONLY)).get("/api/v1/reports/runs/").json()["results"]
    )
    assert theirs["unreadable_batches"] == 0
    assert [p["kind"] for p in theirs["problems"]] == ["tenant_failed"]
    assert "year" not in theirs["problems"][0]["reason"]  # the summary, not the detail
