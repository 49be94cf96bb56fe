"""infra/process_tree.py, infra/run_guard.py and infra/portcheck.py on real processes and
sockets: `make up`'s children are stopped in order within their bounds (SIGKILL after), a
reused pid is never signalled, the guard stops the children when the runner's pipe closes,
and a held port is reported with its holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

INFRA = Path(__file__).resolve().parents[3] / "infra"
sys.path.insert(0, str(INFRA))

import portcheck  # noqa: E402
import process_tree  # noqa: E402

IGNORES_TERM = "trap '' TERM; for i in $(seq 600); do sleep 0.1; done"
STOPS_ON_TERM = "trap 'exit 0' TERM; for i in $(seq 600); do sleep 0.1; done"


@pytest.fixture
def spawn():
    procs: list[subprocess.Popen] = []

    def start(script: str) -> subprocess.Popen:
        p = subprocess.Popen(["bash", "-c", script], start_new_session=True)
        procs.append(p)
        time.sleep(0.2)  # the trap is set
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(5)


def reaper(*procs: subprocess.Popen):
    return lambda: [p.poll() for p in procs]


def test_a_child_that_ignores_sigterm_is_killed_at_its_bound_and_brokers_go_first(spawn):
    stubborn = spawn(IGNORES_TERM)
    polite = spawn(STOPS_ON_TERM)
    children = [
        process_tree.record("control plane", polite.pid, 5.0),
        process_tree.record("broker 1", stubborn.pid, 1.0),
    ]
    said: list[str] = []
    started = time.monotonic()
    killed = process_tree.stop_in_order(children, said.append, reaper(stubborn, polite))
    took = time.monotonic() - started
    assert killed == ["broker 1"]
    assert said == ["broker 1 did not stop within 1 s; killing it"]
    assert stubborn.wait(5) == -9 and polite.wait(5) == 0
    assert 1.0 <= took < 4.0
    assert not any(process_tree.running(c) for c in children)


def test_a_pid_with_another_start_time_is_never_signalled(spawn):
    other = spawn(STOPS_ON_TERM)
    stale = process_tree.Child("broker 1", other.pid, process_tree.start_time(other.pid) - 1, 1)
    assert not process_tree.running(stale)
    assert process_tree.stop_in_order([stale], print, reaper(other)) == []
    assert other.poll() is None  # untouched: the record was of an earlier process


def test_records_round_trip_and_a_broken_file_reads_as_nothing(tmp_path):
    path = tmp_path / "run" / "children.json"
    runner = process_tree.record("runner", os.getpid(), 0)
    kids = [process_tree.Child("broker 1", 123, 456, 20.0)]
    process_tree.write(path, runner, kids)
    assert process_tree.read(path) == (runner, kids)
    path.write_text("{not json")
    assert process_tree.read(path) == (None, [])
    assert process_tree.read(tmp_path / "missing.json") == (None, [])


def test_the_guard_stops_the_children_when_the_runners_pipe_closes(tmp_path, spawn):
    child = spawn(STOPS_ON_TERM)
    path = tmp_path / "children.json"
    process_tree.write(path, None, [process_tree.record("broker 1", child.pid, 5.0)])
    guard = subprocess.Popen(
        [sys.executable, INFRA / "run_guard.py", "--children", path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    assert child.poll() is None and guard.poll() is None  # the runner is alive: nothing
    guard.stdin.close()  # what the kernel does when the runner dies
    assert guard.wait(10) == 0
    out = guard.stdout.read()
    guard.stdout.close()
    assert child.wait(5) == 0
    assert f"broker 1 (pid {child.pid})" in out and "stopped in" in out


def test_a_held_port_is_not_free_and_its_holder_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not portcheck.free("127.0.0.1", port)
        assert portcheck.holder(port).startswith(f"pid {os.getpid()} (")
    assert portcheck.free("127.0.0.1", port)
    assert portcheck.holder(port) is None


def runner_for(var: Path):
    import run_local

    return run_local.Runner(run_local.parse_args(["--var-dir", str(var)]))


def test_a_new_run_stops_what_an_earlier_one_left_running(tmp_path, spawn):
    left = spawn(STOPS_ON_TERM)  # a broker whose runner and guard were both killed
    dead_runner = process_tree.Child("runner", 999_999, 1, 0)  # long gone
    path = tmp_path / "run" / "children.json"
    process_tree.write(path, dead_runner, [process_tree.record("broker 1", left.pid, 5.0)])
    runner = runner_for(tmp_path)
    runner.clear_earlier_run()
    assert left.wait(5) == 0
    me, children = process_tree.read(path)
    assert me.pid == os.getpid() and children == []  # the file is this run's now


def test_a_new_run_refuses_to_start_beside_a_live_runner_on_the_same_data(tmp_path, spawn):
    other = spawn(STOPS_ON_TERM)  # stands for the other runner
    path = tmp_path / "run" / "children.json"
    process_tree.write(path, process_tree.record("runner", other.pid, 0), [])
    runner = runner_for(tmp_path)
    with pytest.raises(SystemExit) as e:
        runner.clear_earlier_run()
    assert f"another make up (runner pid {other.pid}) is running" in str(e.value)
    assert f"kill {other.pid}" in str(e.value)
    runner.stop()  # what main() does next: it must leave the other run's record alone
    assert process_tree.read(path)[0].pid == other.pid
    assert other.poll() is None


def test_a_busy_port_stops_the_start_with_its_holder_named(tmp_path):
    runner = runner_for(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SystemExit) as e:
            runner.check_ports([port])
    text = str(e.value)
    assert text.startswith(f"port {port} is in use by pid {os.getpid()} (")
    assert text.endswith("choose other ports with --port and --broker-ports.")
