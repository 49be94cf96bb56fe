"""The README's quick-start CLI lines, parsed from between its markers, run as written against
what ``make up`` starts (``infra/run_local.py`` on free ports; only the two URLs and the key
are put in), so the README stays true: its topic exists, its export lines name both URLs on
``make up``'s default ports, and every line succeeds. The same run checks that a
``SLUICE_URL`` pointed at the control plane is named as such."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import free_port

from .conftest import ROOT, wait_for

sys.path.insert(0, str(ROOT / "infra"))
import run_local

START, END = "<!-- quickstart-cli:start -->", "<!-- quickstart-cli:end -->"


def quickstart_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index(START) + len(START) : text.index(END)]
    return [
        line
        for line in block.splitlines()
        if line.strip() and not line.startswith("```") and not line.startswith("#")
    ]


def test_the_readme_names_make_ups_defaults_and_its_variables():
    lines = quickstart_lines()
    defaults = run_local.parse_args([])
    exports = " ".join(line for line in lines if line.startswith("export "))
    first_broker = defaults.broker_ports.split(",")[0]
    assert f"SLUICE_URL=http://{defaults.host}:{first_broker}" in exports
    assert f"SLUICE_CONTROL_PLANE_URL=http://{defaults.host}:{defaults.port}" in exports
    assert "SLUICE_API_KEY=" in exports
    assert f"produce {defaults.topic} " in "\n".join(lines), "the demo topic make up creates"
    assert f"consume {defaults.topic} " in "\n".join(lines)
    readme = (ROOT / "README.md").read_text()
    for variable in ("HOST", "PORT", "SLUICE_BROKER_PORTS", "SLUICE_KAFKA_PORTS", "SLUICE_VAR_DIR"):
        assert f"`{variable}`" in readme, f"README does not document {variable}"


def _script(lines: list[str], broker_url: str, cp_url: str, key: str) -> str:
    defaults = run_local.parse_args([])
    first_broker = defaults.broker_ports.split(",")[0]
    out = ["set -euo pipefail"]
    for line in lines:
        line = line.replace(f"http://{defaults.host}:{first_broker}", broker_url)
        line = line.replace(f"http://{defaults.host}:{defaults.port}", cp_url)
        out.append(line.replace("<the printed key>", key))
    return "\n".join(out) + "\n"


def test_the_readme_quickstart_cli_lines_work_on_make_up(tmp_path: Path):
    state_file = tmp_path / "state.json"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SLUICE_CLUSTER_SECRET", "DATABASE_URL", "SLUICE_VAR_DIR", "SLUICE_URL")
    }
    env.update(PYTHONUNBUFFERED="1", SLUICE_ANALYTICS_LIVE="0")
    log_path = tmp_path / "runner.log"
    with log_path.open("wb") as log:
        runner = subprocess.Popen(
            [
                sys.executable,
                "infra/run_local.py",
                "--no-console-build",
                *("--port", str(free_port()), "--var-dir", str(tmp_path / "var")),
                *("--broker-ports", ",".join(str(free_port()) for _ in range(3))),
                *("--kafka-ports", ",".join(str(free_port()) for _ in range(3))),
                *("--state-file", str(state_file)),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def up() -> bool:
            assert runner.poll() is None, log_path.read_text()[-3000:]
            return state_file.exists()

        wait_for("make up's runner", up, timeout=120)
        state = json.loads(state_file.read_text())
        cp_url = state["api_url"].removesuffix("/api/v1/")
        # the URLs as make up prints them: REST: a broker, API: the control plane's API
        script = _script(quickstart_lines(), state["rest_url"], state["api_url"], state["api_key"])
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            env={k: v for k, v in env.items() if not k.startswith("SLUICE_")},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
        assert "produced 1 record to demo-events" in done.stderr
        assert "k1\thello" in done.stdout  # consume --print-key, then the group's read
        assert "high watermark" in done.stdout and "isr" in done.stdout
        assert "created topic clicks" in done.stdout
        assert "group readme" in done.stdout and "consumed 1 record " in done.stderr

        # SLUICE_URL pointed at the control plane by mistake: said so, with the way out
        wrong = subprocess.run(
            [sys.executable, "-m", "brokernodes.cli", "topics", "list"],
            cwd=ROOT,
            env={**env, "SLUICE_URL": cp_url, "SLUICE_API_KEY": state["api_key"]},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert wrong.returncode == 1
        assert "looks like the control plane" in wrong.stderr, wrong.stderr
        assert (
            "http://127.0.0.1:9092" in wrong.stderr and "SLUICE_CONTROL_PLANE_URL" in wrong.stderr
        )
        assert "JSON" not in wrong.stderr
        assert re.search(r"sluice: error: .*\n$", wrong.stderr)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
        try:
            runner.wait(timeout=90)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.wait(timeout=10)
