"""Every process of the service stops within its documented bound (infra/README.md, "How
long a stop takes"), whatever its clients do, and `make up`'s processes die with its runner.

- The control plane under Daphne, with brokers' metadata long polls that are re-issued the
  moment they are answered (as brokers do) and idle connections, exits within
  ``CONTROL_PLANE_STOP_S`` of SIGTERM. (It used to hang for ever: a request accepted while
  Daphne was stopping ran its view in a thread that then waited for the stopped event loop,
  and the interpreter's exit waited for that thread.)
- A broker registered with a control plane that has gone away, holding open client
  connections (an unread fetch, a half-sent request head and body, a live-tail WebSocket, a
  fetch long poll), exits within its bound instead of asking the missing control plane for
  a controlled shutdown for 30 s.
- ``infra/run_local.py`` killed with SIGKILL: its guard stops every child in order (brokers
  first, one at a time), the ports are free, and a second runner on the same ports and data
  comes up.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.cookiejar import CookieJar

import aiohttp
import pytest

from tests.integration.conftest import free_port

from .conftest import ROOT, SECRET, ControlPlane, Proc, http, wait_for

# the documented bounds (infra/README.md), with room for a loaded 2-core machine
CONTROL_PLANE_STOP_S = 10.0
BROKER_STOP_S = 15.0


def alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float) -> list[int]:
    """The pids still alive after ``timeout`` (empty: all gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def daphne_control_plane(tmp_path) -> ControlPlane:
    """A migrated control plane under Daphne, as `make up` runs it (not yet started)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "backend.settings.local",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'control-plane.sqlite3'}",
        "SLUICE_VAR_DIR": str(tmp_path / "var"),
        "SLUICE_CLUSTER_SECRET": SECRET,
        "SLUICE_BROKER_HEARTBEAT_INTERVAL_S": "0.5",
        "SLUICE_INTERNAL_TOPICS_GRACE_S": "1",
        "PYTHONUNBUFFERED": "1",
    }
    cp = ControlPlane(tmp_path, free_port(), env)
    cp.manage("migrate", "--noinput")
    cp.tenant("lifetimes")  # its API key is a metadata record: long polls then wait
    cp.server = Proc(
        "control plane",
        [
            sys.executable,
            "-m",
            "daphne",
            "--bind",
            "127.0.0.1",
            "--port",
            str(cp.port),
            "backend.asgi:application",
        ],
        env,
        tmp_path / "control-plane.log",
        cp.url,
    )
    return cp


class RepeatingLongPoll(threading.Thread):
    """A broker's metadata long poll at the head of the log, re-issued as soon as it is
    answered (on a new connection), until the server goes away or ``stop`` is set."""

    def __init__(self, url: str, version: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.version, self.stop = url, version, stop
        self.answered = 0

    def run(self) -> None:
        path = f"/internal/v1/metadata?since={self.version}&wait_ms=25000"
        for _ in range(10_000):  # bounded
            if self.stop.is_set():
                return
            req = urllib.request.Request(
                self.url + path, headers={"Authorization": f"Cluster {SECRET}"}
            )
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
                self.answered += 1
            except OSError:
                time.sleep(0.01)


def test_the_control_plane_stops_within_its_bound_whatever_brokers_do(tmp_path):
    cp = daphne_control_plane(tmp_path)
    cp.server.start()
    stop = threading.Event()
    try:
        cp.server.wait_ready()
        status, head = cp.internal("GET", "metadata?since=0")
        assert status == 200, head
        version = head["version"]
        assert version > 0, head  # the long polls below must wait
        polls = [RepeatingLongPoll(cp.url, version, stop) for _ in range(6)]
        for p in polls:
            p.start()
        idle = [socket.create_connection(("127.0.0.1", cp.port)) for _ in range(3)]
        idle[0].sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # keep-alive
        idle[1].sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0")  # a half-sent head
        time.sleep(1.0)  # every poll is waiting in its view's thread
        started = time.monotonic()
        cp.server.proc.send_signal(signal.SIGTERM)
        try:
            cp.server.proc.wait(CONTROL_PLANE_STOP_S + 5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Daphne still running {CONTROL_PLANE_STOP_S + 5:g} s after SIGTERM")
        took = time.monotonic() - started
        assert took < CONTROL_PLANE_STOP_S, f"stopped after {took:.1f} s"
        assert port_free(cp.port)  # a new server can listen at once
        for s in idle:
            s.close()
    finally:
        stop.set()
        cp.server.kill()


def start_runner(
    tmp_path, cp_port: int, broker_ports: str, name: str, extra: list[str] | None = None
) -> subprocess.Popen:
    """``infra/run_local.py`` (``make up``) on the given ports, data under tmp_path/var."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SLUICE_CLUSTER_SECRET", "DATABASE_URL", "SLUICE_VAR_DIR")
    }
    log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "infra/run_local.py",
                "--port",
                str(cp_port),
                "--broker-ports",
                broker_ports,
                "--var-dir",
                str(tmp_path / "var"),
                "--state-file",
                str(tmp_path / f"{name}.json"),
                "--no-console-build",
                *(extra or []),
            ],
            cwd=ROOT,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()


def wait_up(tmp_path, runner: subprocess.Popen, name: str) -> dict:
    state = tmp_path / f"{name}.json"

    def up():
        assert runner.poll() is None, (tmp_path / f"{name}.log").read_text()[-3000:]
        return state.exists()

    wait_for(f"{name} up", up, timeout=90)
    return json.loads(state.read_text())


def test_make_up_children_die_with_a_killed_runner_and_make_up_starts_again(tmp_path):
    cp_port = free_port()
    ports = [free_port() for _ in range(3)]
    broker_ports = ",".join(map(str, ports))
    first = start_runner(tmp_path, cp_port, broker_ports, "first")
    second = None
    try:
        pids = list(wait_up(tmp_path, first, "first")["pids"].values())
        first.kill()  # SIGKILL: the runner stops nothing itself
        first.wait(5)
        # brokers one at a time (each a controlled shutdown), then the rest
        left = wait_gone(pids, 3 * BROKER_STOP_S)
        guard_log = (tmp_path / "var" / "logs" / "runner-guard.log").read_text()
        assert not left, f"still running: {left}\n{guard_log}"
        assert "did not stop within" not in guard_log, guard_log
        assert all(port_free(p) for p in [cp_port, *ports])
        for i in (1, 2, 3):
            log = (tmp_path / "var" / "logs" / f"broker-{i}.log").read_text()
            assert "stopped cleanly" in log, log[-2000:]

        second = start_runner(tmp_path, cp_port, broker_ports, "second")
        state = wait_up(tmp_path, second, "second")
        assert http("GET", state["brokers"][0] + "/readyz")[0] == 200
    finally:
        for runner in (first, second):
            if runner is not None and runner.poll() is None:
                runner.send_signal(signal.SIGINT)
                try:
                    runner.wait(90)
                except subprocess.TimeoutExpired:
                    runner.kill()


def test_a_broker_stops_within_its_bound_with_clients_open_and_the_control_plane_gone(
    control_plane,
):
    cp = control_plane
    key = cp.tenant("lifetimes")["api_key"]
    assert cp.api("POST", "topics/", {"name": "held", "partitions": 1}, key=key)[0] == 201
    broker = cp.start_broker(1)
    port = int(broker.url.rsplit(":", 1)[1])
    auth = f"Authorization: Bearer {key}\r\n".encode()
    base = "/sluice/v1/topics/held/partitions/0"

    def known():
        status, _ = http("GET", f"{broker.url}{base}/offsets", key=key)
        return status == 200

    wait_for("the broker to know the topic", known, timeout=30)
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    held[0].sendall(  # a fetch long poll at the log end
        f"GET {base}/batches?offset=0&max_wait_ms=30000 HTTP/1.1\r\nHost: x\r\n".encode()
        + auth
        + b"\r\n"
    )
    held[1].sendall(f"GET {base}/batches?offset=0 HTTP/1.1\r\nHost: x\r\n".encode())  # head
    held[2].sendall(  # a body that never arrives
        f"POST {base}/batches HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n".encode()
        + b"Content-Type: application/vnd.kafka.recordbatch.v2\r\n"
        + auth
        + b"\r\nabc"
    )
    held[3].sendall(  # a live tail that never reads
        b"GET /sluice/v1/ws/consume?topic=held HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n" + auth + b"\r\n"
    )
    time.sleep(0.5)
    cp.server.kill()  # the control plane is gone: no controlled shutdown can be asked for
    started = time.monotonic()
    broker.proc.send_signal(signal.SIGTERM)
    try:
        code = broker.proc.wait(BROKER_STOP_S + 10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the broker still ran {BROKER_STOP_S + 10:g} s after SIGTERM")
    took = time.monotonic() - started
    for s in held:
        s.close()
    assert took < BROKER_STOP_S, f"stopped after {took:.1f} s\n{broker.output()[-3000:]}"
    assert code == 0 and "stopped cleanly" in broker.output(), broker.output()[-3000:]


def test_make_up_says_which_partitions_are_offline_and_why(tmp_path):
    """A whole-cluster crash (runner, guard and every child killed), then `make up` with one
    broker short: the partitions waiting for it are reported, with the reason, while the
    runner waits and in its timeout's message."""
    cp_port = free_port()
    ports = [free_port() for _ in range(3)]
    first = start_runner(tmp_path, cp_port, ",".join(map(str, ports)), "first")
    second = None
    try:
        state = wait_up(tmp_path, first, "first")
        os.kill(state["guard_pid"], signal.SIGKILL)
        first.kill()
        first.wait(5)
        for pid in state["pids"].values():
            os.kill(pid, signal.SIGKILL)
        assert not wait_gone(list(state["pids"].values()), 10)
        second = start_runner(
            tmp_path,
            cp_port,
            ",".join(map(str, ports[:2])),
            "second",
            extra=["--brokers", "2", "--ready-timeout", "25"],
        )
        assert second.wait(120) == 1
        printed = (tmp_path / "second.log").read_text()
        # waiting for the topic's leader (or, when broker 1's metadata still names the old
        # leader, for that leader to serve it)
        assert "Still waiting for " in printed, printed[-4000:]
        assert "timed out after 25 s waiting for " in printed
        assert "partition(s) offline" in printed and "demo-events-0: leader -1" in printed
        assert "broker 3" in printed and "why:" in printed and "What to do:" in printed
    finally:
        for runner in (first, second):
            if runner is not None and runner.poll() is None:
                runner.send_signal(signal.SIGINT)
                try:
                    runner.wait(90)
                except subprocess.TimeoutExpired:
                    runner.kill()


def console_session(cp: ControlPlane, username: str, password: str) -> str:
    """A signed-in console session; returns the Cookie header's value."""
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{cp.url}/api/v1/auth/csrf", timeout=10) as r:
        r.read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    req = urllib.request.Request(
        f"{cp.url}/api/v1/auth/login",
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
        method="POST",
    )
    with opener.open(req, timeout=10) as r:
        assert r.status == 200
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def test_the_control_plane_stops_within_its_bound_with_a_live_tail_and_a_broker_polling(
    tmp_path,
):
    """A real broker long-polling the metadata log and a signed-in console live tail (a
    Channels WebSocket streaming from that broker) stay open through SIGTERM."""
    cp = daphne_control_plane(tmp_path)
    demo = cp.tenant("tail")
    cp.server.start()
    try:
        cp.server.wait_ready()
        broker = cp.start_broker(1)
        key = demo["api_key"]
        assert cp.api("POST", "topics/", {"name": "tailed", "partitions": 1}, key=key)[0] == 201

        def known():
            path = "/sluice/v1/topics/tailed/partitions/0/offsets"
            return http("GET", broker.url + path, key=key)[0] == 200

        wait_for("the broker to know the topic", known, timeout=30)
        cookie = console_session(cp, demo["username"], demo["password"])

        async def tail_through_sigterm() -> tuple[float, object]:
            url = f"ws://127.0.0.1:{cp.port}/ws/console/tail?topic=tailed&partition=0"
            headers = {"Cookie": cookie, "Origin": cp.url}
            async with aiohttp.ClientSession() as session:
                # the first tail creates the organisation's console key, which the broker
                # learns from the metadata log a moment later: until then a tail is refused
                for _ in range(40):
                    ws = await session.ws_connect(url, headers=headers)
                    opened = await ws.receive_json(timeout=10)
                    assert opened["type"] == "open", opened
                    try:  # nothing to stream: an accepted tail stays open
                        early = await ws.receive(timeout=1.0)
                    except TimeoutError:
                        break
                    await ws.close()
                    assert "API key" in str(early.data), early
                else:
                    pytest.fail("the broker never accepted the console's key")
                started = time.monotonic()
                cp.server.proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(cp.server.proc.wait, CONTROL_PLANE_STOP_S + 5)
                took = time.monotonic() - started
                await ws.close()
                return took, code

        try:
            took, code = asyncio.run(tail_through_sigterm())
        except subprocess.TimeoutExpired:
            pytest.fail(f"Daphne still running {CONTROL_PLANE_STOP_S + 5:g} s after SIGTERM")
        assert took < CONTROL_PLANE_STOP_S, f"stopped after {took:.1f} s"
        assert code == 0, cp.server.output()
    finally:
        cp.server.kill()
        for b in cp.brokers:
            b.kill()
