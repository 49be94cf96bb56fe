"""A real control plane (``manage.py runserver`` on a free port, a temp SQLite database) and
real brokers pulling metadata from it, for integration tests, fault tests and benchmarks.
Every wait is bounded; ``start_control_plane`` stops every process it started on exit.

Controllers and failover (for tests/faults and test_controller*.py):

- ``cp.start_controller("c1")`` starts ``manage.py run_controller --controller-id c1`` for
  this control plane (same database and env); ``cp.wait_controller(epoch_above=0)`` waits
  until some controller holds the lease and returns ``{"controller_id", "epoch", ...}``.
  The returned ``Proc`` can be ``stop()``-ed (SIGTERM: releases the lease), ``kill()``-ed
  (SIGKILL: the lease lapses after ``SLUICE_CONTROLLER_LEASE_S``), ``pause()``-d (SIGSTOP)
  and ``resume()``-d (SIGCONT).
- Short broker sessions: override the ``control_plane_env`` fixture (or pass ``env=`` to
  ``start_control_plane``) with ``FAST_FAILOVER_ENV``: a 2 s broker session timeout,
  0.5 s heartbeats, a 3 s controller lease and no automatic preferred-leader rebalance. On a
  loaded 2-core machine heartbeats can arrive late: a 2 s session may now and then fence a
  healthy broker (it is unfenced by its next heartbeat); use 3-4 s where that matters.
- ``cp.internal(method, path, body)`` calls ``/internal/v1/<path>`` with the cluster secret
  (e.g. ``cp.internal("GET", "partitions?state=offline")``); ``cp.topic_record(topic_id)``
  is the topic's latest record in the metadata log (leader, leader_epoch, isr, ...).
- Kafka listeners: ``cp.start_broker(1, kafka=True)`` also listens for Kafka's protocol
  (``b.bootstrap``); ``cp.kafka_bootstrap`` names every such broker.
- Tenants through the console API: ``cp.tenant(slug)`` seeds an organisation with a service
  account, ``StaffSession(cp)`` signs a platform staff user in (quotas), ``create_topic``
  creates a topic and waits until a broker knows it, ``RestProducer`` produces JSON over
  one keep-alive connection.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPConnection
from http.cookiejar import CookieJar
from pathlib import Path

from harness.broker import free_port

ROOT = Path(__file__).resolve().parents[1]  # the repository
SECRET = "integration-cluster-secret"
REST_CLUSTER = "sluice-local"  # the cluster id in REST v3 paths
READY_TIMEOUT_S = 30.0
FAST_FAILOVER_ENV = {
    "SLUICE_BROKER_SESSION_TIMEOUT_S": "2",
    "SLUICE_BROKER_HEARTBEAT_INTERVAL_S": "0.5",
    "SLUICE_CONTROLLER_LEASE_S": "3",
    "SLUICE_AUTO_LEADER_REBALANCE": "0",
}


def http(
    method: str,
    url: str,
    body=None,
    *,
    key: str | None = None,
    timeout: float = 10.0,
    authorization: str | None = None,
) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if authorization:
        req.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            raw = e.read()
            return e.code, (json.loads(raw) if raw else {})


def wait_for(what: str, check: Callable[[], object], timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            last = check()
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    url: str
    proc: subprocess.Popen | None = None
    kafka_port: int | None = None  # a broker's Kafka listener (None: none)

    @property
    def bootstrap(self) -> str:
        """A broker's Kafka listener as ``bootstrap.servers``."""
        assert self.kafka_port, f"{self.name} was started without a Kafka listener"
        return f"127.0.0.1:{self.kafka_port}"

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait_ready(self, path: str = "/readyz", timeout: float = READY_TIMEOUT_S) -> None:
        def ready():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.output()}")
            try:
                return http("GET", self.url + path, timeout=1)[0] == 200
            except (urllib.error.URLError, OSError):
                return False

        wait_for(f"{self.name} ready", ready, timeout)

    def output(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-6000:]
        return ""

    def kill(self) -> None:
        """SIGKILL (a crash: nothing flushed, nothing released)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (missed heartbeats, a lapsing lease)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@dataclass
class ControlPlane:
    workdir: Path
    port: int
    env: dict[str, str]
    server: Proc | None = None
    brokers: list[Proc] = field(default_factory=list)
    controllers: list[Proc] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        """Every started broker's Kafka listener, as ``bootstrap.servers``."""
        return ",".join(b.bootstrap for b in self.brokers if b.kafka_port)

    def manage(self, *argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def tenant(self, slug: str) -> dict:
        """A new organisation with an admin service account; returns seed_demo's JSON."""
        out = self.manage(
            "seed_demo",
            "--json",
            "--organisation",
            slug,
            "--username",
            f"{slug}-owner",
            "--service-account",
            f"{slug}-app",
        )
        return json.loads(out.strip().splitlines()[-1])

    def api(self, method: str, path: str, body=None, *, key: str) -> tuple[int, dict]:
        return http(method, f"{self.url}/api/v1/{path}", body, key=key)

    def start_broker(
        self, broker_id: int, port: int | None = None, *, kafka: bool | int = False
    ) -> Proc:
        """A broker of this control plane; ``kafka`` (True or a port) gives it a Kafka
        listener (SASL_PLAINTEXT on loopback): ``b.kafka_port`` and ``b.bootstrap``."""
        port = port or free_port()
        kafka_port = (kafka if kafka is not True else free_port()) or None
        data = self.workdir / f"broker-{broker_id}"
        argv = [
            sys.executable,
            "-m",
            "brokernodes",
            "--control-plane",
            self.url,
            "--broker-id",
            str(broker_id),
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--no-fsync",
            *(["--kafka-port", str(kafka_port)] if kafka_port else []),
        ]
        b = Proc(
            f"broker {broker_id}",
            argv,
            self.env,
            self.workdir / f"broker-{broker_id}.log",
            f"http://127.0.0.1:{port}",
        )
        b.data_dir = data  # type: ignore[attr-defined]
        b.kafka_port = kafka_port
        b.start()
        self.brokers.append(b)
        b.wait_ready()
        return b

    def internal(self, method: str, path: str, body=None) -> tuple[int, dict]:
        """``/internal/v1/<path>`` with the cluster secret (brokers' and operators' routes)."""
        return http(
            method, f"{self.url}/internal/v1/{path}", body, authorization=f"Cluster {SECRET}"
        )

    def start_controller(self, controller_id: str | None = None) -> Proc:
        """``manage.py run_controller`` against this control plane's database; see the
        module docstring. Does not wait: use ``wait_controller``."""
        controller_id = controller_id or f"controller-{len(self.controllers) + 1}"
        c = Proc(
            f"controller {controller_id}",
            [sys.executable, "manage.py", "run_controller", "--controller-id", controller_id],
            self.env,
            self.workdir / f"controller-{controller_id}.log",
            self.url,
        )
        c.start()
        self.controllers.append(c)
        return c

    def controller_status(self) -> dict:
        status, body = self.internal("GET", "controller")
        assert status == 200, body
        return body["controller"]

    def wait_controller(self, *, epoch_above: int = 0, timeout: float = 30.0) -> dict:
        """Until an active controller holds the lease with an epoch above ``epoch_above``."""

        def active():
            c = self.controller_status()
            return c if c["active"] and c["epoch"] > epoch_above else None

        return wait_for("an active controller", active, timeout)

    def topic_record(self, topic_id: str) -> dict | None:
        """The topic's latest record in the metadata log (None: deleted or never)."""
        status, body = self.internal("GET", "metadata?since=0")
        assert status == 200, body
        for r in body["records"]:
            if r["kind"] == "topic" and r["key"] == topic_id:
                return r["value"]
        return None

    def start_server(self) -> None:
        self.server = Proc(
            "control plane",
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            self.env,
            self.workdir / "control-plane.log",
            self.url,
        )
        self.server.start()
        self.server.wait_ready()


_migrated: dict[str, Path] = {}  # settings module -> a database migrated in this process


def _migrate(cp: ControlPlane, db: Path) -> None:
    """Give ``cp`` a migrated database at ``db``: ``migrate`` runs once per process and
    settings module (in a temporary database, removed at exit); each control plane gets a
    copy (SQLite's backup API) instead of a migrate of its own, which costs a Django start
    and every migration each time. The migrations themselves read no environment."""
    settings = cp.env["DJANGO_SETTINGS_MODULE"]
    if cp.env["DATABASE_URL"] != f"sqlite:///{db}":  # a database not of our making
        cp.manage("migrate", "--noinput")
        return
    template = _migrated.get(settings)
    if template is None:
        tmp = Path(tempfile.mkdtemp(prefix="sluice-migrated-"))
        atexit.register(shutil.rmtree, tmp, True)
        template = tmp / "template.sqlite3"
        env = {**cp.env, "DATABASE_URL": f"sqlite:///{template}", "SLUICE_VAR_DIR": str(tmp)}
        ControlPlane(tmp, 0, env).manage("migrate", "--noinput")
        _migrated[settings] = template
    with (
        contextlib.closing(sqlite3.connect(template)) as src,
        contextlib.closing(sqlite3.connect(db)) as dst,
    ):
        src.backup(dst)


@contextlib.contextmanager
def start_control_plane(tmp_path: Path, env: dict[str, str] | None = None):
    """A migrated control plane serving on a free port, with ``env`` over the defaults;
    stops its brokers, controllers and server on exit."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "backend.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'control-plane.sqlite3'}",
        "SLUICE_VAR_DIR": str(tmp_path / "var"),
        "SLUICE_CLUSTER_SECRET": SECRET,
        "SLUICE_BROKER_HEARTBEAT_INTERVAL_S": "0.5",
        # internal topics wait this long for more brokers (1-broker tests need no more)
        "SLUICE_INTERNAL_TOPICS_GRACE_S": "1",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    cp = ControlPlane(tmp_path, free_port(), env)
    _migrate(cp, tmp_path / "control-plane.sqlite3")
    cp.start_server()
    try:
        yield cp
    finally:
        for b in cp.brokers:
            b.stop()
        for c in cp.controllers:
            c.stop()
        if cp.server is not None:
            cp.server.stop()


class StaffSession:
    """A platform staff user signed in to the console API (session cookie + CSRF token)."""

    def __init__(self, cp: ControlPlane, username: str = "platform-staff") -> None:
        password = "staff-password-for-tests-only"
        cp.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user({username!r}, password={password!r}, "
            "is_staff=True)",
        )
        self.base = f"{cp.url}/api/v1/"
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        assert self.call("GET", "auth/csrf")[0] == 200
        status, body = self.call("POST", "auth/login", {"username": username, "password": password})
        assert status == 200, body

    def _csrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("X-CSRFToken", self._csrf())
        try:
            with self.opener.open(req, timeout=10) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            with contextlib.closing(e):
                raw = e.read()
                return e.code, (json.loads(raw) if raw else {})

    def set_quota(self, organisation: str, **limits) -> dict:
        status, body = self.call("PATCH", f"platform/organisations/{organisation}/quota", limits)
        assert status == 200, body
        return body


class RestProducer:
    """JSON produce over one keep-alive connection (as a client with one request in flight)."""

    def __init__(self, broker_url: str, topic: str, key: str) -> None:
        u = urllib.parse.urlsplit(broker_url)
        self.conn = HTTPConnection(u.hostname, u.port, timeout=30)
        self.path = f"/v3/clusters/{REST_CLUSTER}/topics/{topic}/records"
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def send(self, value: str) -> tuple[int, dict, int, float]:
        """(status, body, request bytes, latency s)."""
        body = json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": value}})
        data = body.encode()
        start = time.perf_counter()
        self.conn.request("POST", self.path, data, self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw), len(data), time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


def create_topic(cp: ControlPlane, broker, name: str, key: str) -> None:
    status, body = cp.api(
        "POST", "topics/", {"name": name, "partitions": 1, "replication_factor": 1}, key=key
    )
    assert status == 201, body

    def known():
        status, meta = http("GET", f"{broker.url}/sluice/v1/metadata", key=key)
        return status == 200 and any(t["name"] == name for t in meta["topics"])

    wait_for(f"the broker to learn topic {name}", known)
