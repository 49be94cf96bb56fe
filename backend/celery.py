"""The Celery app: workers run the analytics jobs, beat schedules them (docs/analytics.md).

Settings come from Django's (``CELERY_*``): the embedded ``filesystem://`` transport under
``var/celery`` by default (no server; ``make up``), Redis in production (``REDIS_URL``). The
beat schedule is ``SLUICE_ANALYTICS_SCHEDULE`` (``job=seconds,...``).

    DJANGO_SETTINGS_MODULE=backend.settings.local celery -A backend worker --pool solo
    DJANGO_SETTINGS_MODULE=backend.settings.local celery -A backend beat

(``--pool solo``: one job at a time in the worker process, which owns the Spark session.)
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from pathlib import Path

from celery import Celery
from celery.signals import beat_init, setup_logging, worker_init, worker_shutting_down

app = Celery("sluice")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["backend.analytics"])


def parse_schedule(spec: str) -> dict[str, float]:
    """``"lag=300,usage=3600"`` -> ``{"lag": 300.0, "usage": 3600.0}``; refuses junk."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        job, sep, seconds = part.partition("=")
        if not sep or float(seconds) <= 0:
            raise ValueError(f"SLUICE_ANALYTICS_SCHEDULE: {part!r} is not job=seconds")
        out[job.strip()] = float(seconds)
    return out


@app.on_after_finalize.connect
def _schedule(sender, **kwargs) -> None:
    from django.conf import settings

    from backend.analytics.models import JOBS

    for job, seconds in parse_schedule(settings.SLUICE_ANALYTICS_SCHEDULE).items():
        if job not in JOBS:
            raise ValueError(f"SLUICE_ANALYTICS_SCHEDULE: unknown job {job!r} (jobs: {JOBS})")
        sender.add_periodic_task(
            seconds, sender.signature("analytics.scheduled_run", args=(job,)), name=f"run {job}"
        )
    from backend.analytics.live_sampler import interval_s

    if interval_s() > 0:  # the live series when the live job is not running (live_sampler)
        sender.add_periodic_task(
            interval_s(),
            sender.signature("analytics.sample_live", options={"expires": interval_s()}),
            name="sample live series",
        )


def _filesystem_dirs(**kwargs) -> None:
    """The filesystem transport needs its folders before the first message."""
    from django.conf import settings

    for key in ("data_folder_in", "data_folder_out", "processed_folder"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)


@setup_logging.connect
def _logging(**kwargs) -> None:
    """Workers and beat log through Django's LOGGING with the redaction filter on every
    handler, instead of Celery's own handlers (which would have no filter)."""
    from django.conf import settings

    from backend.core.logging import configure

    configure(settings.LOGGING)


def stop_bound_s() -> float:
    """How long a worker may take to stop after SIGTERM (``SLUICE_WORKER_STOP_S``, 15 s)."""
    return float(os.environ.get("SLUICE_WORKER_STOP_S", "15"))


def _bound_the_stop(sig=None, how=None, exitcode=None, **kwargs) -> None:
    """Celery's warm shutdown waits for the running job however long it takes; past the
    bound the worker logs what it was doing and exits (jobs are acknowledged late, so the
    job runs again on the next worker)."""

    def expire() -> None:
        frames = sys._current_frames()
        where = "".join(
            f"thread {t.name}:\n" + "".join(traceback.format_stack(frames[t.ident]))
            for t in threading.enumerate()
            if t.ident in frames and t is not threading.current_thread()
        )
        logging.getLogger("sluice.analytics").error(
            "the worker did not stop within %g s of %s; exiting. Threads:\n%s",
            bound,
            sig or "shutdown",
            where,
        )
        logging.shutdown()
        os._exit(4)

    bound = stop_bound_s()
    timer = threading.Timer(bound, expire)
    timer.daemon = True
    timer.start()


worker_init.connect(_filesystem_dirs)
beat_init.connect(_filesystem_dirs)
worker_shutting_down.connect(_bound_the_stop)
