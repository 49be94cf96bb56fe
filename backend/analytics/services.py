"""Writes of the analytics app: queue a run, execute it (the Celery task calls this), store
each job's rows. Rows name organisations by id (the brokers' tenant); rows of organisations
that no longer exist are dropped.

Who may run what: a cluster-wide run reads every tenant's topics, so only operators queue
one (platform staff, the schedule, ``manage.py analytics_run``); a tenant admin's run reads
its own organisation's topics and stores its own rows. A cluster-wide run that fails is run
again tenant by tenant, so one tenant's failure costs only that tenant its report."""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.analytics import runner
from backend.analytics.models import (
    JOBS,
    CompactionRow,
    JobRun,
    LagRow,
    QuotaSuggestion,
    RetentionRow,
    RunProblem,
    SkewRow,
    StorageSample,
    ThroughputPeak,
    ThroughputRow,
    UsageRow,
)
from backend.audit.services import audit_record
from backend.core.context import RequestContext
from backend.core.exceptions import InvalidRequest, PermissionDenied

logger = logging.getLogger("sluice.analytics")

SCOPES = ("organisation", "cluster")
MAX_PROBLEMS_PER_TENANT = 1000  # unreadable batches stored per tenant and run (all counted)


class OperatorRequired(PermissionDenied):
    """A cluster-wide run asked for by someone who is not an operator."""

    error_code = "OPERATOR_REQUIRED"


def is_operator(ctx: RequestContext | None) -> bool:
    """The schedule and the operators' shell (no context), platform staff, the system."""
    if ctx is None or ctx.role in ("staff", "system"):
        return True
    return ctx.service_account is None and bool(getattr(ctx.user, "is_staff", False))


def _enqueue(run: JobRun) -> None:
    from backend.analytics.tasks import execute_run

    transaction.on_commit(lambda: execute_run.delay(str(run.id)))


@transaction.atomic
def run_request(
    *,
    job: str,
    ctx: RequestContext | None = None,
    trigger: str = "manual",
    enqueue: bool = True,
    scope: str = "cluster",
) -> JobRun:
    """Queue a run of ``job`` now: over every tenant (``scope`` cluster: operators only) or
    over ``ctx``'s organisation. A run of it with that scope already queued is returned
    instead (a click twice, or many tenants asking at once, queue one run); 202 either
    way."""
    if job not in JOBS:
        raise InvalidRequest(f"unknown job {job!r}", {"job": [f"one of {', '.join(JOBS)}"]})
    if scope not in SCOPES:
        raise InvalidRequest(f"unknown scope {scope!r}", {"scope": [f"one of {', '.join(SCOPES)}"]})
    organisation = None
    if scope == "cluster":
        if not is_operator(ctx):
            raise OperatorRequired(
                "only operators (platform staff) run a job over every tenant; ask for "
                '{"scope": "organisation"} to run it over your own organisation\'s topics'
            )
    else:
        organisation = ctx.organisation if ctx is not None else None
        if organisation is None:
            raise InvalidRequest(
                "a run for an organisation needs one", {"scope": ["use cluster here"]}
            )
    runs_expire()
    existing = (
        JobRun.objects.select_for_update()
        .filter(job=job, status="queued", organisation=organisation)
        .first()
    )
    if existing is not None:
        return existing
    run = JobRun.objects.create(
        job=job,
        trigger=trigger,
        requested_by=ctx.actor_label if ctx else "schedule",
        organisation=organisation,
    )
    if ctx is not None and ctx.organisation is not None:
        audit_record(
            ctx=ctx,
            action="report_run.request",
            object_type="report_run",
            object_id=run.id,
            after={"job": job, "trigger": trigger, "scope": scope},
        )
    if enqueue:
        _enqueue(run)
    return run


def run_execute(run_id: str | uuid.UUID) -> JobRun:
    """Run a queued job: status, timing and errors recorded whatever happens."""
    with transaction.atomic():
        run = JobRun.objects.select_for_update().get(pk=run_id)
        if run.status != "queued":
            return run
        run.status = "running"
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at"])
        _supersede(run)
    started = time.monotonic()
    try:
        results, failed = _compute(run)
        with transaction.atomic():
            written = STORE[run.job](run, results or {})
            _store_problems(run, results.get("unreadable", []) if results else [], failed)
        run.status, run.rows_written = "succeeded", written
        if failed:
            run.error = "some tenants failed and have no new rows: " + "; ".join(
                f"{org}: {_one_line(e)}" for org, e in failed.items()
            )
    except Exception as e:  # every failure is recorded on the run, then logged
        logger.exception("analytics run %s (%s) failed", run.id, run.job)
        run.status = "failed"
        run.error = _one_line(e)
        run.error_summary = (
            f"the {run.job} job failed ({type(e).__name__}); operators find the details in the "
            f"control plane's log under run {run.id}"
        )
    run.finished_at = timezone.now()
    run.duration_s = round(time.monotonic() - started, 3)
    run.save()
    return run


def _one_line(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(e)).strip()[-4000:]


def _compute(run: JobRun) -> tuple[dict, dict[str, BaseException]]:
    """The run's results, and the tenants whose own re-run failed. A cluster-wide run that
    fails is computed again per tenant (one Spark job each): whatever broke for one
    tenant then breaks only its report. If every tenant fails, the first error is the run's."""
    if run.organisation_id is not None:
        return runner.run_job(run.job, organisation_id=run.organisation_id), {}
    try:
        return runner.run_job(run.job), {}
    except Exception as whole:
        tenants = runner.tenants_with_topics() if run.job != "usage" else []
        if len(tenants) < 2:
            raise
        logger.warning(
            "analytics run %s (%s) failed over every tenant (%s); running it per tenant",
            run.id,
            run.job,
            _one_line(whole),
        )
    merged: dict[str, list] = {}
    failed: dict[str, BaseException] = {}
    for org in tenants:
        try:
            part = runner.run_job(run.job, organisation_id=org) or {}
        except Exception as e:  # this tenant's share failed on its own: record, go on
            logger.exception("analytics run %s (%s) failed for tenant %s", run.id, run.job, org)
            failed[org] = e
            continue
        for key, rows in part.items():
            merged.setdefault(key, []).extend(rows)
    if len(failed) == len(tenants):
        raise next(iter(failed.values()))
    return merged, failed


def _store_problems(run: JobRun, unreadable: list[dict], failed: dict) -> None:
    """The run's unreadable batches and failed tenants, per organisation, each logged once
    per tenant (counts in full; at most ``MAX_PROBLEMS_PER_TENANT`` batches stored)."""
    orgs = _orgs([*unreadable, *({"tenant": t} for t in failed)])
    per_tenant: dict[str, list[dict]] = {}
    for r in unreadable:
        if r["tenant"] in orgs:
            per_tenant.setdefault(r["tenant"], []).append(r)
    objs = []
    for tenant, rows in per_tenant.items():
        first = rows[0]
        logger.warning(
            "analytics run %s (%s): tenant %s: %d unreadable batches skipped; first in %s-%s at "
            "offset %s: %s",
            run.id,
            run.job,
            tenant,
            len(rows),
            first["topic"],
            first["partition"],
            first["offset"],
            first["reason"],
        )
        objs += [
            RunProblem(
                run=run,
                organisation=orgs[tenant],
                kind="unreadable_batch",
                topic=r["topic"],
                partition=r["partition"],
                offset=r["offset"],
                reason=str(r["reason"])[:300],
            )
            for r in rows[:MAX_PROBLEMS_PER_TENANT]
        ]
    for tenant, e in failed.items():
        if tenant in orgs:
            objs.append(
                RunProblem(
                    run=run,
                    organisation=orgs[tenant],
                    kind="tenant_failed",
                    reason=f"the {run.job} job failed for this organisation "
                    f"({type(e).__name__}); operators find the details under run {run.id}",
                )
            )
    RunProblem.objects.bulk_create(objs, batch_size=500)


# --- runs nobody finishes ------------------------------------------------------------------


def run_timeout_s() -> float:
    """How long a run may stay queued or running before it is marked stale (the setting
    ``SLUICE_ANALYTICS_RUN_TIMEOUT_S``, from the environment variable of that name; 2 h)."""
    return float(settings.SLUICE_ANALYTICS_RUN_TIMEOUT_S)


def _stale(run: JobRun, why: str, now) -> None:
    run.status = "failed"
    run.finished_at = now
    since = run.started_at or run.queued_at
    run.duration_s = round((now - since).total_seconds(), 3) if run.started_at else None
    run.error = f"STALE_RUN: {why}"
    run.error_summary = f"stale run: {why}"[:300]
    run.save(update_fields=["status", "finished_at", "duration_s", "error", "error_summary"])
    logger.warning("analytics run %s (%s) marked stale: %s", run.id, run.job, why)


def runs_expire(*, now=None) -> int:
    """Mark runs left queued or running longer than ``run_timeout_s()`` failed (a killed
    worker never records its run's end; a lost queue message never starts it, and a run
    queued forever would absorb every later request). Returns how many were marked."""
    now = now or timezone.now()
    limit = run_timeout_s()
    cutoff = now - timedelta(seconds=limit)
    n = 0
    with transaction.atomic():
        for run in JobRun.objects.select_for_update().filter(
            status="running", started_at__lt=cutoff
        ):
            _stale(run, f"still running after {limit:g} s: its worker presumably died", now)
            n += 1
        for run in JobRun.objects.select_for_update().filter(status="queued", queued_at__lt=cutoff):
            _stale(run, f"queued for over {limit:g} s and never started", now)
            n += 1
    return n


def _supersede(run: JobRun) -> None:
    """A run of ``run.job`` starting: earlier runs of that job still marked running are
    stale (a worker runs one job at a time, so the one that owned them is gone)."""
    now = run.started_at
    older = JobRun.objects.select_for_update().filter(
        job=run.job, status="running", started_at__lt=now
    )
    for other in older.exclude(pk=run.pk):
        _stale(
            other, f"superseded by run {run.id} of the same job: its worker presumably died", now
        )


# --- storing results ------------------------------------------------------------------------


def _orgs(rows, key: str = "tenant") -> dict[str, object]:
    from backend.tenancy.models import Organisation

    ids = set()
    for r in rows:
        try:
            ids.add(uuid.UUID(str(r.get(key))))
        except ValueError:
            continue
    return {str(o.id): o for o in Organisation.objects.filter(id__in=ids)}


def _replaced(model, run: JobRun):
    """The rows a run replaces: every tenant's, or its own organisation's."""
    qs = model.objects.all()
    return qs if run.organisation_id is None else qs.filter(organisation_id=run.organisation_id)


def _upsert(model, objs, unique: list[str], update: list[str]) -> int:
    if not objs:
        return 0
    model.objects.bulk_create(
        objs, batch_size=500, update_conflicts=True, unique_fields=unique, update_fields=update
    )
    return len(objs)


def store_lag(run: JobRun, results: dict) -> int:
    history, status = results.get("history", []), results.get("status", [])
    orgs = _orgs(history + status)
    objs = []
    for kind, rows in (("sample", history), ("now", status)):
        for r in rows:
            org = orgs.get(r["tenant"])
            if org is None:
                continue
            objs.append(
                LagRow(
                    organisation=org,
                    run=run,
                    kind=kind,
                    ts=runner.utc(r["ts_ms"] if kind == "sample" else r["sampled_ms"]),
                    group_id=r["group"],
                    topic=r["topic"],
                    partition=r["partition"],
                    committed_offset=r["committed_offset"],
                    log_end_offset=r["log_end_offset"],
                    offset_lag=r["offset_lag"],
                    time_lag_ms=r["time_lag_ms"],
                    status=r["status"],
                    catch_up_s=r.get("catch_up_s"),
                    retention_risk=r.get("retention_risk"),
                )
            )
    if status:
        LagRow.objects.filter(kind="now", organisation__in=list(orgs.values())).delete()
    return _upsert(
        LagRow,
        objs,
        ["organisation", "kind", "group_id", "topic", "partition", "ts"],
        [
            "run",
            "committed_offset",
            "log_end_offset",
            "offset_lag",
            "time_lag_ms",
            "status",
            "catch_up_s",
            "retention_risk",
        ],
    )


def store_throughput(run: JobRun, results: dict) -> int:
    n = 0
    for granularity in ("minute", "hour"):
        rows = results.get(granularity, [])
        orgs = _orgs(rows)
        objs = [
            ThroughputRow(
                organisation=orgs[r["tenant"]],
                granularity=granularity,
                ts=runner.utc(r["ts"]),
                topic=r["topic"],
                partition=r["partition"],
                records=r["records"],
                bytes=r["bytes"],
            )
            for r in rows
            if r["tenant"] in orgs
        ]
        n += _upsert(
            ThroughputRow,
            objs,
            ["organisation", "granularity", "topic", "partition", "ts"],
            ["records", "bytes"],
        )
    return (
        n + _store_peaks(run, results.get("peaks", [])) + _store_skew(run, results.get("skew", []))
    )


def _store_peaks(run: JobRun, rows: list[dict]) -> int:
    """Peaks are over the run's look-back, so each run's replace every earlier one."""
    orgs = _orgs(rows)
    _replaced(ThroughputPeak, run).delete()
    objs = [
        ThroughputPeak(
            organisation=orgs[r["tenant"]],
            run=run,
            topic=r["topic"],
            peak_ts=runner.utc(r["peak_ts"]),
            peak_records=r["peak_records"],
            peak_bytes=r["peak_bytes"],
            mean_records=r["mean_records"],
        )
        for r in rows
        if r["tenant"] in orgs
    ]
    ThroughputPeak.objects.bulk_create(objs, batch_size=500)
    return len(objs)


def _store_skew(run: JobRun, rows: list[dict]) -> int:
    orgs = _orgs(rows)
    objs = [
        SkewRow(
            organisation=orgs[r["tenant"]],
            run=run,
            ts=runner.utc(r["ts"]),
            topic=r["topic"],
            busiest_partition=r["busiest_partition"],
            max_share=r["max_share"],
            skew=r["skew"],
            hot_partition=r["hot_partition"],
        )
        for r in rows
        if r["tenant"] in orgs
    ]
    return _upsert(
        SkewRow,
        objs,
        ["organisation", "topic", "ts"],
        ["run", "busiest_partition", "max_share", "skew", "hot_partition"],
    )


def store_retention(run: JobRun, results: dict) -> int:
    rows = results.get("partitions", [])
    storage = results.get("storage", [])
    orgs = _orgs(rows + storage)
    RetentionRow.objects.filter(organisation__in=list(orgs.values())).delete()
    objs = [
        RetentionRow(
            organisation=orgs[r["tenant"]],
            run=run,
            topic=r["topic"],
            partition=r["partition"],
            bytes=r["bytes"],
            segments=r["segments"],
            oldest_ts=runner.utc(r["oldest_ts"]) if r.get("oldest_ts") else None,
            **{
                f"delete_{h}h_{u}": r[f"delete_{h}h_{u}"]
                for h in (1, 6, 24)
                for u in ("bytes", "records")
            },
        )
        for r in rows
        if r["tenant"] in orgs
    ]
    RetentionRow.objects.bulk_create(objs, batch_size=500)
    samples = [
        StorageSample(
            organisation=orgs[r["tenant"]],
            topic=r["topic"],
            ts=runner.utc(r["ts"]),
            bytes=r["bytes"],
        )
        for r in storage
        if r["tenant"] in orgs
    ]
    StorageSample.objects.bulk_create(samples, batch_size=500)
    return len(objs) + len(samples) + _store_compaction(run, results.get("compaction", []))


def _store_compaction(run: JobRun, rows: list[dict]) -> int:
    """A run measures every compacted topic now, so it replaces every earlier measurement
    (a topic no longer compacted drops out)."""
    orgs = _orgs(rows)
    _replaced(CompactionRow, run).delete()
    fields = ("records", "distinct_keys", "tombstones", "keyless", "effectiveness")
    objs = [
        CompactionRow(
            organisation=orgs[r["tenant"]],
            run=run,
            topic=r["topic"],
            partition=r["partition"],
            **{f: r[f] for f in fields},
        )
        for r in rows
        if r["tenant"] in orgs
    ]
    CompactionRow.objects.bulk_create(objs, batch_size=500)
    return len(objs)


USAGE_SUMS = ("bytes_in", "bytes_out", "records_in", "records_out", "requests", "throttle_ms")


def store_usage(run: JobRun, results: dict) -> int:
    n = 0
    for granularity in ("hour", "day"):
        rows = results.get(granularity, [])
        orgs = _orgs(rows)
        objs = [
            UsageRow(
                organisation=orgs[r["tenant"]],
                granularity=granularity,
                ts=runner.utc(r["ts"]),
                service_account=r["service_account"],
                topic=r["topic"],
                storage_gb_hours=r["storage_gb_hours"] or 0.0,
                **{k: r[k] or 0 for k in USAGE_SUMS},
            )
            for r in rows
            if r["tenant"] in orgs
        ]
        n += _upsert(
            UsageRow,
            objs,
            ["organisation", "granularity", "service_account", "topic", "ts"],
            [*USAGE_SUMS, "storage_gb_hours"],
        )
    quotas = results.get("quotas", [])
    orgs = _orgs(quotas)
    QuotaSuggestion.objects.filter(organisation__in=list(orgs.values())).delete()
    fields = [
        f.name
        for f in QuotaSuggestion._meta.fields
        if f.name not in ("id", "organisation", "run", "service_account")
    ]
    objs = [
        QuotaSuggestion(
            organisation=orgs[r["tenant"]],
            run=run,
            service_account=r["service_account"],
            **{f: r[f] for f in fields},
        )
        for r in quotas
        if r["tenant"] in orgs
    ]
    QuotaSuggestion.objects.bulk_create(objs)
    return n + len(objs)


STORE = {
    "lag": store_lag,
    "throughput": store_throughput,
    "retention": store_retention,
    "usage": store_usage,
}
