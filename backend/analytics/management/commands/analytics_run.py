"""``manage.py analytics_run JOB [--now]``: queue a run (a Celery worker executes it) or,
with ``--now``, execute it in this process; prints the run as JSON."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from backend.analytics import services
from backend.analytics.models import JOBS


def run_json(run) -> str:
    return json.dumps(
        {
            "id": str(run.id),
            "job": run.job,
            "status": run.status,
            "trigger": run.trigger,
            "duration_s": run.duration_s,
            "rows_written": run.rows_written,
            "error": run.error,
        }
    )


class Command(BaseCommand):
    help = "Queue (or with --now, execute) an analytics run and print it as JSON."

    def add_arguments(self, parser) -> None:
        parser.add_argument("job", choices=JOBS)
        parser.add_argument("--now", action="store_true", help="execute here, not on a worker")

    def handle(self, *args, job: str, now: bool, **options) -> None:
        run = services.run_request(job=job, trigger="manual", enqueue=not now)
        if now:
            run = services.run_execute(run.id)
            if run.status != "succeeded":
                raise CommandError(f"run {run.id} failed: {run.error}")
        self.stdout.write(run_json(run))
