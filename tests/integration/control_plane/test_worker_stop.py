"""The analytics worker stops within its bound of SIGTERM even while a job never ends
(Celery's warm shutdown alone waits for the job for ever). A real worker on the embedded
filesystem transport, with a stuck job loaded by ``-I``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BOUND_S = 2.0


def test_worker_exits_within_its_bound_while_a_job_runs(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "backend.settings.local",
        "SLUICE_VAR_DIR": str(tmp_path / "var"),
        "SLUICE_WORKER_STOP_S": str(BOUND_S),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    (tmp_path / "var").mkdir()
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "backend", "worker", "--pool", "solo"),
                *("--loglevel", "INFO", "-I", "tests.integration.control_plane.stuck_task"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log_path.read_bytes():  # its transport folders exist now
            assert worker.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "backend", "call", "sluice_test.stuck"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 60
        while b"sluice_test.stuck" not in log_path.read_bytes() or b"received" not in (
            log_path.read_bytes()
        ):
            assert worker.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(0.5)  # the job is running now
        sent = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(BOUND_S + 8)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the worker was still running {BOUND_S + 8:g} s after SIGTERM"
            ) from None
        took = time.monotonic() - sent
        assert took < BOUND_S + 8
        assert b"did not stop within" in log_path.read_bytes()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
