"""infra/offline_report.py and the runner's wait: offline partitions are reported with
their state, the replicas that are missing, the controller's reason and what to do, the
waited topic first; the runner says so while it waits and in its timeout's message."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

INFRA = Path(__file__).resolve().parents[3] / "infra"
sys.path.insert(0, str(INFRA))

import offline_report  # noqa: E402
import run_local  # noqa: E402

WHY = "every eligible replica restarted uncleanly: unclean recovery waits for brokers 3"


def partition(topic: str, n: int, **kw) -> dict:
    return {
        "topic": topic,
        "partition": n,
        "leader": -1,
        "isr": [],
        "elr": [],
        "last_known_elr": [1, 3],
        "replicas": [1, 2, 3],
        "offline": True,
        "offline_reason": WHY,
        **kw,
    }


CONTROLLER = {
    "controller": {"active": True, "controller_id": "local", "epoch": 2},
    "brokers": [
        {"broker_id": 1, "live": True, "fenced": False},
        {"broker_id": 2, "live": False, "fenced": True},
    ],
}


def test_each_offline_partition_with_its_state_what_is_missing_why_and_what_to_do():
    parts = [partition("__consumer_offsets", i) for i in range(8)] + [partition("demo", 0)]
    text = offline_report.describe(parts, CONTROLLER, "/v/logs", topic="demo")
    lines = text.splitlines()
    assert lines[0] == "9 partition(s) offline (no leader):"
    # the waited topic first, each with leader, ISR, ELR, last known ELR and replicas
    assert lines[1] == (
        "  demo-0: leader -1, ISR [], ELR [], last known ELR [1, 3]; replicas [1, 2, 3]"
    )
    assert "  ... and 3 more like these" in lines  # 6 named per group
    assert (
        "    missing: broker 2 fenced (no heartbeat within its session); broker 3 never registered"
    ) in lines
    assert f"    why: {WHY}" in lines
    assert lines[-1] == (
        "What to do: bring back brokers 2, 3 (their logs: /v/logs/broker-2.log, "
        "/v/logs/broker-3.log); the controller's decisions are in /v/logs/controller.log."
    )


def test_no_active_controller_is_said_and_online_partitions_are_not_reported():
    idle = {"controller": {"active": False}, "brokers": CONTROLLER["brokers"]}
    text = offline_report.describe([partition("t", 0)], idle, "/v/logs")
    assert "no controller is active: see /v/logs/controller.log" in text
    assert offline_report.describe([partition("t", 0, offline=False)], idle, "/v") is None


def test_the_runner_says_why_while_it_waits_and_when_it_times_out(tmp_path, capsys):
    args = run_local.parse_args(["--var-dir", str(tmp_path), "--ready-timeout", "0.6"])
    runner = run_local.Runner(args)
    runner.stopping = True  # no children to check
    explained = []

    def why():
        explained.append(1)
        return "1 partition(s) offline (no leader): ..."

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_local, "REPORT_AFTER_S", 0.2)
        with pytest.raises(SystemExit) as e:
            runner.wait_until("topic 'demo'", lambda: None, explain=why)
    assert str(e.value) == (
        "timed out after 1 s waiting for topic 'demo'\n1 partition(s) offline (no leader): ..."
    )
    out = capsys.readouterr().out
    assert "Still waiting for topic 'demo' after 0 s." in out or "after 1 s." in out
    assert out.count("1 partition(s) offline") == 1  # said once while unchanged
    assert len(explained) >= 2


def test_a_control_plane_that_cannot_say_why_is_reported_not_raised(tmp_path):
    runner = run_local.Runner(run_local.parse_args(["--var-dir", str(tmp_path)]))

    def broken():
        raise OSError("connection refused")

    assert runner.explained(broken) == "(could not ask the control plane why: connection refused)"
