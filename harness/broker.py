"""Real broker processes on loopback, for integration tests, fault tests and benchmarks.

``BrokerLauncher(base_dir)(topics=..., **options)`` starts ``python -m brokernodes`` on a
free loopback port with a generated static metadata file (``make_metadata``), waits for
``/readyz`` (bounded), and returns a ``BrokerProcess`` that can be stopped, killed,
restarted and called over HTTP; ``close`` stops every broker it started.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "API_KEY",
    "CLUSTER_ID",
    "DEFAULT_TOPICS",
    "KEY_ID",
    "SECRET",
    "BrokerLauncher",
    "BrokerProcess",
    "free_port",
    "make_metadata",
]

CLUSTER_ID = "test-cluster"
KEY_ID = "sk_test"
SECRET = "s3cret-test-value"
API_KEY = f"{KEY_ID}.{SECRET}"
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0

# name -> (partitions, configs)
DEFAULT_TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "orders": (3, {}),
    "events": (1, {}),
    "small": (1, {"segment.bytes": "4096", "max.message.bytes": "2048"}),
    "compacted": (1, {"cleanup.policy": "compact"}),
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_metadata(
    port: int,
    topics: dict[str, tuple[int, dict[str, str]]] | None = None,
    *,
    broker_id: int = 1,
    cluster_id: str = CLUSTER_ID,
    key_id: str = KEY_ID,
    secret: str = SECRET,
    other_brokers: list[dict] | None = None,
    leaders: dict[str, list[int]] | None = None,
    kafka_port: int | None = None,
) -> dict:
    """A static metadata document as docs/data-plane-api.md describes it (``kafka_port``:
    the broker's Kafka listener, named in its broker entry)."""
    topics = DEFAULT_TOPICS if topics is None else topics
    leaders = leaders or {}
    me: dict = {"id": broker_id, "url": f"http://127.0.0.1:{port}"}
    if kafka_port:
        me["kafka"] = f"127.0.0.1:{kafka_port}"
    return {
        "cluster_id": cluster_id,
        "broker_id": broker_id,
        "brokers": [me, *(other_brokers or [])],
        "topics": [
            {
                "name": name,
                "topic_id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "partitions": n,
                "leaders": leaders.get(name, [broker_id] * n),
                "configs": configs,
            }
            for name, (n, configs) in topics.items()
        ],
        "api_keys": [
            {
                "key_id": key_id,
                "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(),
                "principal": "User:test",
            }
        ],
    }


@dataclass
class BrokerProcess:
    """One running ``python -m brokernodes``; ``stop``/``kill``/``restart`` manage it."""

    workdir: Path
    port: int
    metadata_path: Path
    data_dir: Path
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    api_key: str = API_KEY
    cluster_id: str = CLUSTER_ID
    kafka_port: int | None = None  # its Kafka listener (None: none)
    proc: subprocess.Popen | None = None
    _log_index: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        """The Kafka listener's ``host:port`` (bootstrap.servers)."""
        assert self.kafka_port, "this broker was started without a Kafka listener"
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def log_path(self) -> Path:
        return self.workdir / f"broker-{self._log_index}.log"

    def start(self) -> None:
        self._log_index += 1
        cmd = [
            sys.executable,
            "-m",
            "brokernodes",
            "--config",
            str(self.metadata_path),
            "--data-dir",
            str(self.data_dir),
            "--port",
            str(self.port),
            "--host",
            "127.0.0.1",
            *(["--kafka-port", str(self.kafka_port)] if self.kafka_port else []),
            *self.extra_args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        finally:
            log.close()
        self.wait_ready()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode} before ready:\n{self.output()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker not ready within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; returns the exit code (SIGKILL if it does not stop in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise RuntimeError(f"broker did not stop on SIGTERM:\n{self.output()}") from None

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, *, hard: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with ``hard``) and start again on the same port."""
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    def request(
        self,
        method: str,
        path: str,
        body: bytes | dict | list | None = None,
        *,
        headers: dict[str, str] | None = None,
        auth: bool = True,
        timeout: float = 10.0,
    ) -> tuple[int, dict[str, str], bytes]:
        """A small blocking HTTP call (status, headers, body); never raises on 4xx/5xx."""
        hdrs = dict(self.headers if auth else {})
        if isinstance(body, dict | list):
            body = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            with contextlib.closing(e):
                return e.code, dict(e.headers), e.read()

    def json(self, method: str, path: str, body=None, **kw) -> tuple[int, dict]:
        status, _, data = self.request(method, path, body, **kw)
        return status, (json.loads(data) if data else {})


class BrokerLauncher:
    """Starts brokers in directories under ``base_dir``; ``close`` stops them all."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.started: list[BrokerProcess] = []

    def __call__(
        self,
        topics: dict[str, tuple[int, dict[str, str]]] | None = None,
        *,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        metadata: dict | None = None,
        name: str | None = None,
        port: int | None = None,
        kafka: bool | int = False,
        **metadata_kw,
    ) -> BrokerProcess:
        """Start a broker (``topics``: name -> (partitions, configs)) and wait until ready;
        ``kafka`` (True or a port) gives it a Kafka listener too."""
        workdir = self.base_dir / (name or f"broker{len(self.started) + 1}")
        workdir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        kafka_port = (kafka if kafka is not True else free_port()) or None
        doc = metadata or make_metadata(port, topics, kafka_port=kafka_port, **metadata_kw)
        metadata_path = workdir / "metadata.json"
        metadata_path.write_text(json.dumps(doc, indent=1))
        b = BrokerProcess(
            workdir=workdir,
            port=port,
            metadata_path=metadata_path,
            data_dir=workdir / "data",
            extra_args=list(extra_args or []),
            env=dict(env or {}),
            cluster_id=doc["cluster_id"],
            kafka_port=kafka_port,
        )
        self.started.append(b)
        b.start()
        return b

    def close(self) -> None:
        for b in self.started:
            with contextlib.suppress(Exception):
                b.stop(timeout=5)
            b.kill()
