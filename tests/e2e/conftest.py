"""The web console's tests: Vitest component tests and Playwright (headless Chromium) against
the stack ``infra/run_local.py`` (``make up``) starts on free ports. ``make test`` installs
Chromium (apt) and the npm packages first (``make console-setup``); run alone, these tests
skip with the reason when npm, node_modules or Chromium are missing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
CHROMIUM = os.environ.get("SLUICE_CHROMIUM", "/usr/bin/chromium")
NO_SCHEDULE = "lag=86400,throughput=86400,retention=86400,usage=86400"


def need_node() -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("needs Node and npm (make console-setup)")
    if not (ROOT / "node_modules" / ".package-lock.json").exists():
        pytest.skip("needs the npm packages: run `npm ci` (make console-setup)")


def need_browser() -> None:
    need_node()
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"needs Chromium at {CHROMIUM} (make console-setup installs it with apt)")


# What the stack must not inherit from the test run's environment: it keeps its own
# database (SQLite under its var dir, even when the suite runs on PostgreSQL), secret and var.
NOT_INHERITED = ("SLUICE_CLUSTER_SECRET", "DATABASE_URL", "SLUICE_VAR_DIR")


def stack_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}


def run(argv: list[str], *, timeout: float, env: dict | None = None, cwd: Path = ROOT):
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**stack_env(), **(env or {})},
    )


class Stack:
    def __init__(self, state: dict, var: Path) -> None:
        self.state = state
        self.var = var
        self.url = state["console_url"].rstrip("/")

    @property
    def cluster_secret(self) -> str:
        return (self.var / "cluster-secret").read_text().strip()

    def python(self, *argv: str) -> str:
        """Run ``python <argv>`` against this stack's database (its settings and var dir);
        its stdout."""
        done = run(
            [sys.executable, *argv],
            timeout=60,
            env={
                "DJANGO_SETTINGS_MODULE": "backend.settings.local",
                "SLUICE_VAR_DIR": str(self.var),
                "SLUICE_CLUSTER_SECRET": self.cluster_secret,
            },
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout


def call(stack: Stack, method: str, url: str, body=None) -> tuple[int, object]:
    """An API call with Demo's API key; the status and the decoded JSON body."""
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    req.method = method
    req.add_header("Authorization", f"Bearer {stack.state['api_key']}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def topic_read_by_group(stack: Stack, new_topic: dict, record: dict, group: str) -> str:
    """Create ``new_topic`` (the topics API's body), produce ``record`` to it (Confluent v3
    body) and have ``group`` read and commit it, so the topic's tabs and the group's page have
    something to show; the topic's name."""
    from brokernodes.client import GroupConsumer

    topic = new_topic["name"]
    status, doc = call(stack, "POST", f"{stack.url}/api/v1/topics/", new_topic)
    assert status in (200, 201), doc
    cluster = f"{stack.state['leader_url']}/v3/clusters/{stack.state['cluster_id']}"
    deadline = time.monotonic() + 20
    while True:  # the new partition's leader may take a moment to be known
        status, doc = call(stack, "POST", f"{cluster}/topics/{topic}/records", record)
        if status == 200:
            break
        assert time.monotonic() < deadline, (status, doc)
        time.sleep(0.5)
    consumer = GroupConsumer(
        stack.state["brokers"],
        stack.state["api_key"],
        group_id=group,
        topics=[topic],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += consumer.poll(timeout=1.0)
        assert got, "the group read nothing"
        consumer.commit()
    finally:
        consumer.close()
    return topic


def browse_script(stack: Stack, script: str, *, timeout: float = 420, **env: str) -> str:
    """Run the Playwright script ``tests/e2e/<script>`` against ``stack`` signed in as Demo's
    owner; its output (printed, for the failure report). Fails when the script does."""
    done = run(
        ["node", str(ROOT / "tests" / "e2e" / script)],
        timeout=timeout,
        env={
            "SLUICE_URL": stack.url,
            "SLUICE_USER": stack.state["username"],
            "SLUICE_PASSWORD": stack.state["password"],
            "ARTIFACTS": str(ARTIFACTS),
            "CHROMIUM": CHROMIUM,
            "TOPIC": stack.state["topic"],
            "API_KEY": stack.state["api_key"],
            **env,
        },
    )
    out = done.stdout + done.stderr
    print(out)
    assert done.returncode == 0, out[-6000:]
    return out


@pytest.fixture(scope="package")
def stack(tmp_path_factory) -> Iterator[Stack]:
    """One stack for every console test module (each brings its own topics and groups).
    Package-scoped, not session-scoped: the stack (three brokers, Celery and the live Spark
    job) stops after the last console test instead of loading the two cores under every
    test that runs after it."""
    need_browser()
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    tmp = tmp_path_factory.mktemp("console-stack")
    state_file = tmp / "state.json"
    env = stack_env()
    log_path = tmp / "runner.log"
    with open(log_path, "wb") as log:
        runner = subprocess.Popen(
            [
                sys.executable,
                "infra/run_local.py",
                "--port",
                str(free_port()),
                "--broker-ports",
                ",".join(str(free_port()) for _ in range(3)),
                "--kafka-ports",  # not the default 29092-29094: another stack may hold them
                ",".join(str(free_port()) for _ in range(3)),
                "--var-dir",
                str(tmp / "var"),
                "--state-file",
                str(state_file),
            ],
            cwd=ROOT,
            # no scheduled Spark job during the browser test: it would take both cores and
            # replace the report rows the test stores (tests/e2e/seed_reports.py)
            env={**env, "PYTHONUNBUFFERED": "1", "SLUICE_ANALYTICS_SCHEDULE": NO_SCHEDULE},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 240  # includes a console build when sources changed
        while not state_file.exists():
            assert runner.poll() is None, log_path.read_text()[-4000:]
            assert time.monotonic() < deadline, "the stack did not come up in time"
            time.sleep(0.3)
        yield Stack(json.loads(state_file.read_text()), tmp / "var")
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            try:
                runner.wait(timeout=45)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait(timeout=10)
