"""``manage.py analytics_live``: the live analytics job (``spark.jobs.live``) with the control
plane's tables as its sink, until SIGTERM or SIGINT.

It supervises itself: it waits for the brokers and the internal topics (``make up`` starts it
beside the Celery worker, before the brokers), and when the job fails (a broker gone mid-batch,
a query error) it logs why and starts again from the checkpoint (``--checkpoint``, default
``<var>/analytics-live``) after a back-off of 5 s doubling to 5 min. With ``--available-now``
it reads what is there, samples the lag once and exits; a failure is then its exit status."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from backend.analytics import live_services, runner

logger = logging.getLogger("sluice.analytics")
FIRST_BACKOFF_S, MAX_BACKOFF_S = 5.0, 300.0


def _terminate_children() -> None:
    """SIGTERM to this process's children (Spark's JVM while it starts), from Linux's
    ``/proc/self/task/*/children``; nothing where that does not exist."""
    for listing in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for pid in listing.read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGTERM)


class Command(BaseCommand):
    help = "Run the live analytics job (per-minute lag and throughput) until stopped."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--checkpoint", default=str(settings.VAR_DIR / "analytics-live"))
        parser.add_argument("--interval", type=float, default=30.0, help="seconds per tick")
        parser.add_argument(
            "--available-now",
            action="store_true",
            help="read what is there now, sample the lag once and exit (a bounded run)",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=120.0,
            help="with --available-now: seconds to wait for the brokers and internal topics",
        )

    def handle(self, *args, checkpoint, interval, available_now, wait, **options) -> None:
        logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per Spark callback
        stop = threading.Event()
        starting = True  # until the job runs: Spark's start-up holds the main thread

        def on_signal(*_) -> None:
            stop.set()
            if starting:
                # nothing to save yet (no batch, no checkpoint): stop now rather than after
                # the JVM's start-up (10-20 s on a loaded machine, past `make up`'s 15 s stop
                # bound), and stop the JVM being started too: it would outlive this process
                _terminate_children()
                raise SystemExit(0)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        if available_now:
            job = self._job(checkpoint, interval, stop, deadline=time.monotonic() + wait)
            starting = False
            if job is not None:
                job.run_available_now()
            return
        backoff = FIRST_BACKOFF_S
        while not stop.is_set():
            started = time.monotonic()
            try:
                starting = True
                job = self._job(checkpoint, interval, stop, deadline=None)
                starting = False
                if job is None:
                    return
                logger.info("live analytics: every %g s, checkpoint %s", interval, checkpoint)
                job.run(stop)
            except Exception:  # supervise: log, back off, resume from the checkpoint
                if stop.is_set():  # stopping: the JVM may be gone before the queries
                    break
                if time.monotonic() - started > MAX_BACKOFF_S:
                    backoff = FIRST_BACKOFF_S  # it ran a while: a fresh failure
                logger.exception("live analytics failed; starting again in %g s", backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _job(self, checkpoint: str, interval: float, stop: threading.Event, *, deadline):
        """The job, once the brokers answer and ``__consumer_offsets`` and ``__usage`` exist
        (the controller creates them when brokers register); None when stopped first."""
        from spark.jobs.live import LiveConfig, LiveJob

        said = 0.0
        while not stop.is_set():
            refs = runner.internal_topic("__consumer_offsets"), runner.internal_topic("__usage")
            if all(refs) and runner.bootstrap():
                break
            if deadline is not None and time.monotonic() > deadline:
                raise CommandError(
                    "no brokers, or no __consumer_offsets and __usage topics yet: start the "
                    "brokers and the controller first"
                )
            if time.monotonic() - said > 60:
                logger.info("live analytics: waiting for brokers and the internal topics")
                said = time.monotonic()
            stop.wait(1.0)
        else:
            return None
        retention_ms = int(live_services.retention().total_seconds() * 1000)
        return LiveJob(
            runner._spark(),
            runner._source(),
            offsets_topic=refs[0],
            usage_topic=refs[1],
            topics=runner.tenant_topics,
            sink=live_services.ControlPlaneSink(),
            config=LiveConfig(checkpoint, interval_s=interval, retention_ms=retention_ms),
        )
