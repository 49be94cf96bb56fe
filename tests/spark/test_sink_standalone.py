"""The sink on a Spark standalone cluster (the master and worker of
``test_standalone_cluster``'s ``cluster`` fixture): ``sink_scenarios`` as a driver process
with ``SPARK_MASTER=spark://...`` writes through the worker's executors; a task killed
mid-write on its first attempt (``spark.task.maxFailures`` 4) and a streaming query
restarted before a micro-batch's commit still leave every row in the topic once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.spark.test_sink import read_topic, values
from tests.spark.test_standalone_cluster import cluster  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
ROWS = 4000

pytestmark = pytest.mark.slow


def test_sink_on_a_standalone_cluster(broker_factory, cluster, tmp_path):  # noqa: F811
    broker = broker_factory({"retried": (3, {}), "streamed": (2, {})})
    args = {
        "master": cluster.master,
        "bootstrap": broker.url,
        "api_key": broker.api_key,
        "work": str(tmp_path),
        "out": str(tmp_path / "results.json"),
        "scenarios": [
            {
                "name": "retried",
                "kind": "batch",
                "rows": ROWS,
                "options": {"topic": "retried", "failPartition": 0, "failAfterBatches": 2},
            },
            {
                "name": "streamed",
                "kind": "stream",
                "rows": 3000,
                "options": {"topic": "streamed"},
            },
        ],
    }
    (tmp_path / "args.json").write_text(json.dumps(args))
    apps_before = set(cluster.work_dir.glob("app-*"))
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.sink_scenarios", str(tmp_path / "args.json")],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["retried"]["ok"], results["retried"]
    [commit] = results["retried"]["commits"]
    assert any(m["already_written"] > 0 for m in commit["messages"]), commit
    assert values(read_topic(broker, "retried", 3, ROWS)) == Counter(f"v{i}" for i in range(ROWS))
    streamed = results["streamed"]
    assert streamed["ok"] and len(streamed["runs"]) == 2, streamed
    replay = [c for c in streamed["commits"] if c["batch"] == 1][-1]["messages"]
    assert sum(m["written"] for m in replay) == 0
    assert values(read_topic(broker, "streamed", 2, 3000)) == Counter(f"v{i}" for i in range(3000))
    assert set(cluster.work_dir.glob("app-*")) - apps_before, "no application ran on the worker"
