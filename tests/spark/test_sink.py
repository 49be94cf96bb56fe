"""``df.write`` / ``df.writeStream`` ``.format("sluice")`` against a real broker: every row
lands exactly once even when Spark retries a task that died mid-write, and when a restarted
streaming query replays a micro-batch whose records were already written; the records'
keys, partitions and headers are Kafka's sink's; errors name what to fix.

The Spark jobs run in one subprocess (``sink_scenarios``) with ``local[2,4]``: four attempts
per task, which the shared ``local[2]`` test session does not allow."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from brokernodes.client import Consumer
from brokernodes.client.partitioner import murmur2
from spark.datasource.sink_identity import CLIENT_CHOSEN_MIN

ROOT = Path(__file__).resolve().parents[2]
ROWS = 6000
TOPICS = {
    "plain": (3, {}),
    "retried": (3, {}),
    "streamed": (2, {}),
    "by_column": (2, {}),
    "by_column2": (1, {}),
    "override": (2, {}),
    "reordered": (1, {}),
    "tiny": (1, {"max.message.bytes": "2000"}),
}
SCENARIOS = [
    {
        "name": "plain",
        "kind": "batch",
        "rows": 2000,
        "format": "sluice",
        "options": {"topic": "plain", "batchSize": 4096},
    },
    {
        "name": "retried",
        "kind": "batch",
        "rows": ROWS,
        "options": {"topic": "retried", "failPartition": 1, "failAfterBatches": 3},
    },
    {
        "name": "streamed",
        "kind": "stream",
        "rows": 3000,
        "options": {
            "topic": "streamed",
            "failPartition": 0,
            "failBatch": "2",
            "failAfterBatches": 1,
        },
    },
    {"name": "by_column", "kind": "batch", "rows": 200, "routed": True, "format": "sluice"},
    {
        "name": "override",
        "kind": "batch",
        "rows": 100,
        "routed": True,
        "format": "sluice",
        "options": {"bootstrap": "", "kafka.bootstrap.servers": "@hostport", "topic": "override"},
    },
    {
        "name": "reordered",
        "kind": "batch",
        "rows": 3000,
        "options": {
            "topic": "reordered",
            "failPartition": 0,
            "failAfterBatches": 1,
            "reorderOnRetry": "true",
        },
    },
    {
        "name": "too_large",
        "kind": "batch",
        "rows": 4,
        "pad": 5000,
        "format": "sluice",
        "options": {"topic": "tiny"},
    },
    {
        "name": "overwrite",
        "kind": "batch",
        "rows": 4,
        "format": "sluice",
        "mode": "overwrite",
        "options": {"topic": "plain"},
    },
    {"name": "no_topic", "kind": "batch", "rows": 10, "format": "sluice", "options": {}},
    {
        "name": "unknown_topic",
        "kind": "batch",
        "rows": 10,
        "format": "sluice",
        "options": {"topic": "nope"},
    },
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    work = tmp_path_factory.mktemp("sink")
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
        results = json.loads((work / "results.json").read_text())
        yield broker, results, done.stderr
    finally:
        launcher.close()


def read_topic(broker, topic: str, partitions: int, expected: int) -> list:
    out = []
    with Consumer(broker.url, broker.api_key, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        deadline = time.monotonic() + 30
        idle = 0
        while time.monotonic() < deadline and idle < 3:
            got = c.poll(1.0)
            out += got
            idle = 0 if got else idle + 1
            if len(out) > expected and idle:
                break
    return out


def values(records) -> Counter:
    return Counter(r.value.decode() for r in records)


def test_plain_write_keeps_keys_partitions_and_headers(run):
    broker, results, _ = run
    assert results["plain"]["ok"], results["plain"]
    records = read_topic(broker, "plain", 3, 2000)
    assert values(records) == Counter(f"v{i}" for i in range(2000))
    for r in records:
        i = int(r.value.decode()[1:])
        if i % 3:
            assert r.key == f"k{i % 37}".encode()
            assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 3
        else:
            assert r.key is None
        expected = [("i", str(i).encode()), ("n", None)] if i % 5 == 0 else []
        assert [(k, v) for k, v in r.headers] == expected
    # keyless rows move on to the next partition after a batch's worth (batchSize)
    assert len({r.partition for r in records if r.key is None}) > 1


def test_a_retried_task_leaves_no_duplicate(run):
    broker, results, _ = run
    assert results["retried"]["ok"], results["retried"]
    [commit] = results["retried"]["commits"]
    by_partition = {m["spark_partition"]: m for m in commit["messages"]}
    # the retried task found what its first attempt had appended, and sent only the rest
    assert by_partition[1]["already_written"] > 0
    assert by_partition[0]["already_written"] == 0
    assert sum(m["written"] + m["already_written"] for m in by_partition.values()) == ROWS
    assert all(m["producer_id"] >= CLIENT_CHOSEN_MIN for m in by_partition.values())
    records = read_topic(broker, "retried", 3, ROWS)
    assert values(records) == Counter(f"v{i}" for i in range(ROWS))


def test_a_replayed_micro_batch_leaves_no_duplicate(run):
    broker, results, _ = run
    res = results["streamed"]
    assert res["ok"], res
    assert len(res["runs"]) == 2  # the first run stopped at batch 1's commit, the second ended
    batches = [c["batch"] for c in res["commits"]]
    assert batches == [0, 1, 1, 2]  # batch 1 written twice: the replay found all of it
    replay = res["commits"][2]["messages"]
    assert sum(m["written"] for m in replay) == 0
    assert sum(m["already_written"] for m in replay) == 1000
    # batch 2's task was retried inside the run
    assert sum(m["already_written"] for m in res["commits"][3]["messages"]) > 0
    records = read_topic(broker, "streamed", 2, 3000)
    assert values(records) == Counter(f"v{i}" for i in range(3000))


def test_topic_and_partition_columns_and_the_topic_option(run):
    broker, results, _ = run
    assert results["by_column"]["ok"] and results["override"]["ok"], results
    even = read_topic(broker, "by_column", 2, 100)
    odd = read_topic(broker, "by_column2", 1, 100)
    assert values(even) == Counter(f"v{i}" for i in range(0, 200, 2))
    assert values(odd) == Counter(f"v{i}" for i in range(1, 200, 2))
    assert all(r.partition == int(r.value[1:]) % 4 // 2 for r in even)
    # the option wins over the column (as Kafka's sink)
    assert values(read_topic(broker, "override", 2, 100)) == Counter(f"v{i}" for i in range(100))


def test_a_retry_whose_input_changed_fails_instead_of_guessing(run):
    broker, results, _ = run
    res = results["reordered"]
    assert not res["ok"]
    assert "INPUT_CHANGED" in res["error"] and "sortWithinPartitions" in res["error"]
    # what the attempts appended is each row at most once: the retries appended nothing
    counts = values(read_topic(broker, "reordered", 1, 3000))
    assert counts and max(counts.values()) == 1


def test_errors_name_what_to_fix(run):
    _, results, _ = run
    assert not results["no_topic"]["ok"]
    assert (
        "set option 'topic' or give the DataFrame a 'topic' column" in results["no_topic"]["error"]
    )
    assert not results["unknown_topic"]["ok"]
    assert "topic 'nope' is not in the cluster metadata" in results["unknown_topic"]["error"]
    assert not results["overwrite"]["ok"]
    assert "mode('overwrite') cannot replace its records" in results["overwrite"]["error"]
    # the broker's refusal fails the task with its code and message
    assert not results["too_large"]["ok"]
    assert "MESSAGE_TOO_LARGE: tiny-0:" in results["too_large"]["error"]
