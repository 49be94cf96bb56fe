"""``sluice groups`` against real brokers: list and describe with lag per partition, a reset
whose dry run is what --execute then does, and delete."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integration.groups.conftest import GROUP_TOPICS, http_json, start_cluster


def sluice(url: str, key: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLUICE_URL": url, "SLUICE_API_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "brokernodes.cli", *args],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_groups_list_describe_reset_delete(broker_factory):
    cluster = start_cluster(broker_factory, GROUP_TOPICS)
    b, key = cluster[0], cluster[0].api_key
    for i in range(9):  # orders-0..2, each led by a different broker, get 3 records each
        leader = cluster[i % 3]
        http_json(
            "POST",
            f"{leader.url}/v3/clusters/test-cluster/topics/orders/records",
            {"partition_id": i % 3, "value": {"type": "STRING", "data": f"v{i}"}},
            key=key,
        )
    for group, offset in (("cli-a", 1), ("cli-b", 3)):
        s, c = http_json("GET", f"{b.url}/sluice/v1/groups/{group}/coordinator", key=key)
        s, _ = http_json(
            "POST",
            f"{c['url']}/sluice/v1/groups/{group}/offsets",
            {"offsets": [{"topic": "orders", "partition": p, "offset": offset} for p in range(3)]},
            key=key,
        )
        assert s == 200
    done = sluice(b.url, key, "groups", "list", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {g["group_id"]: g for g in json.loads(done.stdout)}
    assert rows["cli-a"]["total_lag"] == 6 and rows["cli-b"]["total_lag"] == 0
    assert rows["cli-a"]["health"] == "STOP" and rows["cli-b"]["health"] == "EMPTY"

    done = sluice(b.url, key, "groups", "describe", "cli-a", "--format", "json")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert [(r["partition"], r["committed_offset"], r["lag"]) for r in d["offsets"]] == [
        (0, 1, 2),
        (1, 1, 2),
        (2, 1, 2),
    ]
    text = sluice(b.url, key, "groups", "describe", "cli-a")
    assert text.returncode == 0 and b"orders" in text.stdout and b"total lag 6" in text.stdout

    dry = sluice(
        b.url,
        key,
        "groups",
        "reset-offsets",
        "cli-a",
        "--topic",
        "orders",
        "--shift-by",
        "1",
        "--partitions",
        "0,2",
        "--format",
        "json",
    )
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert not plan["applied"]
    assert [(r["partition"], r["current"], r["target"]) for r in plan["plan"]] == [
        (0, 1, 2),
        (2, 1, 2),
    ]
    done = sluice(
        b.url,
        key,
        "groups",
        "reset-offsets",
        "cli-a",
        "--topic",
        "orders",
        "--shift-by",
        "1",
        "--partitions",
        "0,2",
        "--execute",
        "--format",
        "json",
    )
    assert json.loads(done.stdout)["plan"] == plan["plan"]
    d = json.loads(sluice(b.url, key, "groups", "describe", "cli-a", "--format", "json").stdout)
    assert [r["committed_offset"] for r in d["offsets"]] == [2, 1, 2]

    assert sluice(b.url, key, "groups", "delete", "cli-a").returncode == 0
    gone = sluice(b.url, key, "groups", "describe", "cli-a")
    assert gone.returncode == 1 and b"GROUP_ID_NOT_FOUND" in gone.stderr
    bad = sluice(b.url, key, "groups", "reset-offsets", "cli-b", "--topic", "nope", "--to-earliest")
    assert bad.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in bad.stderr
