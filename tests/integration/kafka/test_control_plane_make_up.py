"""``make up`` (``infra/run_local.py``) gives every broker a Kafka listener and prints the
bootstrap address and kcat lines that work: run as printed, they produce a record and read
it back with the demo key."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from harness.broker import free_port
from harness.control_plane import ROOT, wait_for


@pytest.mark.skipif(shutil.which("kcat") is None, reason="needs kcat")
def test_make_up_prints_working_kcat_lines(tmp_path):
    state_file = tmp_path / "state.json"
    kafka_port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SLUICE_CLUSTER_SECRET", "DATABASE_URL", "SLUICE_VAR_DIR")
    }
    log_path = tmp_path / "runner.log"
    with open(log_path, "wb") as log:
        runner = subprocess.Popen(
            [
                sys.executable,
                "infra/run_local.py",
                "--brokers",
                "1",
                "--partitions",
                "1",
                "--port",
                str(free_port()),
                "--broker-ports",
                str(free_port()),
                "--kafka-ports",
                str(kafka_port),
                "--var-dir",
                str(tmp_path / "var"),
                "--state-file",
                str(state_file),
                "--no-console-build",
            ],
            cwd=ROOT,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def up():
            assert runner.poll() is None, log_path.read_text()
            return state_file.exists()

        wait_for("make up", up, timeout=120)
        state = json.loads(state_file.read_text())
        printed = log_path.read_text()
        assert state["kafka_bootstrap"] == f"127.0.0.1:{kafka_port}"
        assert f"Kafka:      {state['kafka_bootstrap']}" in printed
        assert state["kcat_produce"] in printed and state["kcat_consume"] in printed
        user, secret = state["api_key"].split(".", 1)
        assert f"sasl.username={user}" in state["kcat_produce"]
        assert f"sasl.password={secret}" in state["kcat_consume"]

        produced = subprocess.run(
            ["bash", "-c", state["kcat_produce"]], capture_output=True, text=True, timeout=60
        )
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run(
            ["bash", "-c", state["kcat_consume"]], capture_output=True, text=True, timeout=60
        )
        assert consumed.returncode == 0, consumed.stderr
        assert "hello, kafka" in consumed.stdout.splitlines()
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            try:
                runner.wait(60)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait(10)
    assert runner.returncode == 0, log_path.read_text()[-3000:]
