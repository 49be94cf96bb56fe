"""``infra/run_local.py`` (``make up``) as a subprocess on temp ports and dirs: it comes up,
its printed curl lines produce and consume, and SIGINT stops every process it started."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.conftest import free_port

from .conftest import ROOT, wait_for


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes (its parent reaps it)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_run_local_starts_everything_and_stops_on_sigint(tmp_path):
    state_file = tmp_path / "state.json"
    ports = ",".join(str(free_port()) for _ in range(3))
    # its own SQLite under --var-dir, whatever database the suite runs on
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SLUICE_CLUSTER_SECRET", "DATABASE_URL", "SLUICE_VAR_DIR")
    }
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115 - closed below
    runner = subprocess.Popen(
        [
            sys.executable,
            "infra/run_local.py",
            "--port",
            str(free_port()),
            "--broker-ports",
            ports,
            "--var-dir",
            str(tmp_path / "var"),
            "--state-file",
            str(state_file),
        ],
        cwd=ROOT,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    try:

        def up():
            assert runner.poll() is None, (tmp_path / "runner.log").read_text()
            return state_file.exists()

        wait_for("the runner", up, timeout=90)
        state = json.loads(state_file.read_text())
        printed = (tmp_path / "runner.log").read_text()
        assert state["curl_produce"] in printed and state["curl_consume"] in printed
        # one URL for REST: both lines go through it, whichever broker leads the partition
        assert f"REST:       {state['rest_url']}" in printed
        assert state["rest_url"] in state["curl_produce"]
        assert state["rest_url"] in state["curl_consume"]
        assert "partition_id" not in state["curl_produce"]
        assert state["api_key"] in printed
        # the control plane, its controller and three brokers (other services may join)
        assert {"control plane", "controller", "broker 1", "broker 2", "broker 3"} <= set(
            state["pids"]
        )
        assert (tmp_path / "var" / "cluster-secret").stat().st_mode & 0o077 == 0

        produced = subprocess.run(
            shlex.split(state["curl_produce"]), capture_output=True, text=True, timeout=20
        )
        body = json.loads(produced.stdout)
        assert body["topic_name"] == state["topic"] and body["offset"] >= 0, produced

        def consumed():
            done = subprocess.run(
                shlex.split(state["curl_consume"]), capture_output=True, text=True, timeout=20
            )
            return [r["value"] for r in json.loads(done.stdout)["records"]]

        # the demo topic is replicated: the record is readable once the followers have it
        values = wait_for("the record below the high watermark", lambda: consumed() or None)
        assert "hello, sluice" in values, values
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
        stopping = time.monotonic()
        try:
            status = runner.wait(timeout=90)  # brokers get 20 s each, the rest 15 s
        except subprocess.TimeoutExpired:
            runner.kill()
            raise
    stop_s = time.monotonic() - stopping
    print(f"run_local stopped in {stop_s:.1f} s")
    printed = (tmp_path / "runner.log").read_text()
    assert status == 0, printed[-3000:]
    # every process stopped on its own (none was killed after its stop timeout): the brokers'
    # metadata long polls no longer hold Daphne for up to 25 s (backend/asgi_aborts.py)
    assert "did not stop within" not in printed, f"stopping took {stop_s:.1f} s\n{printed[-3000:]}"
    deadline = time.monotonic() + 5
    pids = json.loads(state_file.read_text())["pids"].values()
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]
    for i in (1, 2, 3):
        assert "stopped cleanly" in (tmp_path / "var" / "logs" / f"broker-{i}.log").read_text()
