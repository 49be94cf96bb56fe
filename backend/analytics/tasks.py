"""Celery tasks: beat's scheduled runs and the execution of a queued run."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="analytics.execute_run")
def execute_run(run_id: str) -> str:
    from backend.analytics.services import run_execute

    return run_execute(run_id).status


@shared_task(name="analytics.scheduled_run")
def scheduled_run(job: str) -> str:
    """Beat's tick: queue a run (recorded as queued first) and execute it here."""
    from backend.analytics.services import run_execute, run_request

    run = run_request(job=job, trigger="schedule", enqueue=False)
    return run_execute(run.id).status


@shared_task(name="analytics.sample_live")
def sample_live() -> dict:
    """Beat's minute tick: the control plane's sample of the live series (live_sampler)."""
    from backend.analytics.live_sampler import sample

    return sample()
