"""Celery end to end: a private Redis, a real worker and beat, a migrated SQLite control
plane database; beat's schedule and a manual request both become runs the worker executes
and records (status, duration). No brokers run, so the usage job finds no ``__usage`` topic
and succeeds with nothing to store; the job itself is covered by test_jobs_ground_truth."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def _wait(what, check, timeout=60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_worker_and_beat_record_runs_through_redis(tmp_path):
    port = free_port()
    redis = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "backend.settings.local",
        "SLUICE_VAR_DIR": str(tmp_path / "var"),
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
        "SLUICE_ANALYTICS_SCHEDULE": "usage=1",
        "SLUICE_CLUSTER_SECRET": "e2e-secret",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DATABASE_URL", None)
    (tmp_path / "var").mkdir()
    procs: list[subprocess.Popen] = []

    def manage(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def runs() -> list[dict]:
        return [json.loads(line) for line in manage("analytics_runs").splitlines() if line]

    try:
        manage("migrate", "--noinput")
        for name, cmd in (
            ("worker", ["worker", "--pool", "solo", "--loglevel", "INFO"]),
            ("beat", ["beat", "--schedule", str(tmp_path / "beat-schedule")]),
        ):
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "backend", *cmd],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        scheduled = _wait(
            "a scheduled run executed by the worker",
            lambda: [
                r for r in runs() if r["trigger"] == "schedule" and r["status"] == "succeeded"
            ],
            timeout=90,
        )
        assert scheduled[0]["job"] == "usage" and scheduled[0]["duration_s"] is not None
        queued = json.loads(manage("analytics_run", "usage").splitlines()[-1])
        assert queued["status"] == "queued"
        done = _wait(
            "the manual run",
            lambda: [
                r
                for r in runs()
                if r["id"] == queued["id"] and r["status"] != "queued" and r["status"] != "running"
            ],
        )
        assert done[0]["status"] == "succeeded", done
        assert done[0]["rows_written"] == 0 and done[0]["error"] == ""
    finally:
        for p in procs:
            _stop(p)
        _stop(redis)
        for name in ("worker", "beat"):
            with contextlib.suppress(OSError):
                print(name, (tmp_path / f"{name}.log").read_text()[-2000:])
