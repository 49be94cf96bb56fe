"""The Spark sink's transactional mode (``transactional.id.prefix``) against a real broker:
each task writes in a transaction of its own that the driver commits, so a task that died
mid-write (its records acknowledged, then the attempt failed) leaves them aborted: a
read_committed consumer reads every row exactly once, while a read_uncommitted one also
sees the dead attempt's records. The jobs run in a subprocess (``sink_scenarios``) with
``local[2,4]`` so that Spark retries the task."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from brokernodes.client import Consumer

ROOT = Path(__file__).resolve().parents[2]
ROWS = 6000  # 500 rows an Arrow batch: the failing task dies after 3 of its 6
PREFIX = "sink-txn-"
TOPICS = {
    "txn_plain": (2, {}),
    "txn_retried": (3, {}),
    "__consumer_offsets": (2, {"cleanup.policy": "compact"}),
    "__transaction_state": (2, {"cleanup.policy": "compact"}),
}
SCENARIOS = [
    {
        "name": "txn_plain",
        "kind": "batch",
        "rows": 500,
        "options": {"topic": "txn_plain", "transactional.id.prefix": PREFIX},
    },
    {
        "name": "txn_retried",
        "kind": "batch",
        "rows": ROWS,
        "options": {
            "topic": "txn_retried",
            "failPartition": 1,
            "failAfterBatches": 3,
            "transactional.id.prefix": PREFIX,
        },
    },
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    work = tmp_path_factory.mktemp("sink-txn")
    launcher = BrokerLauncher(work / "brokers")
    try:
        broker = launcher(TOPICS)
        args = {
            "bootstrap": broker.url,
            "api_key": broker.api_key,
            "work": str(work),
            "out": str(work / "results.json"),
            "scenarios": SCENARIOS,
        }
        (work / "args.json").write_text(json.dumps(args))
        done = subprocess.run(
            [sys.executable, "-m", "tests.spark.sink_scenarios", str(work / "args.json")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-5000:]
        yield broker, json.loads((work / "results.json").read_text())
    finally:
        launcher.close()


def read_values(broker, topic: str, partitions: int, isolation: str, expected: int) -> Counter:
    out: Counter = Counter()
    with Consumer(
        broker.url, broker.api_key, auto_offset_reset="earliest", isolation_level=isolation
    ) as c:
        c.assign([(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        deadline = time.monotonic() + 30
        idle = 0
        while time.monotonic() < deadline and idle < 3:
            got = c.poll(1.0)
            out.update(r.value.decode() for r in got)
            idle = 0 if got else idle + 1
            if sum(out.values()) >= expected and idle:
                break
    return out


def test_a_transactional_write_is_read_committed_once(run):
    broker, results = run
    assert results["txn_plain"]["ok"], results["txn_plain"]
    [commit] = results["txn_plain"]["commits"]
    assert all(m["transactional_id"].startswith(PREFIX) for m in commit["messages"])
    got = read_values(broker, "txn_plain", 2, "read_committed", 500)
    assert got == Counter(f"v{i}" for i in range(500))


def test_a_dead_attempt_is_aborted_and_its_retry_committed(run):
    broker, results = run
    assert results["txn_retried"]["ok"], results["txn_retried"]
    [commit] = results["txn_retried"]["commits"]
    by_partition = {m["spark_partition"]: m for m in commit["messages"]}
    # the retried task's init bumped the epoch (fencing and aborting the dead attempt) and
    # wrote all its rows again; nothing is skipped in this mode
    assert by_partition[1]["producer_epoch"] > by_partition[0]["producer_epoch"]
    assert sum(m["written"] for m in by_partition.values()) == ROWS
    assert all(m["already_written"] == 0 for m in by_partition.values())
    committed = read_values(broker, "txn_retried", 3, "read_committed", ROWS)
    assert committed == Counter(f"v{i}" for i in range(ROWS))
    everything = read_values(broker, "txn_retried", 3, "read_uncommitted", ROWS + 1)
    assert sum(everything.values()) > ROWS  # the dead attempt's records are in the log
