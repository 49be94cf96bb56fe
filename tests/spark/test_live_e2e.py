"""The live job end to end: a control plane and a broker; a tenant produces to a two-partition
topic and commits a group's offsets; ``manage.py analytics_live --available-now`` (the
two Structured Streaming queries over ``__consumer_offsets`` and ``__usage``, bounded, then
one lag sample) stores minute rows, and ``/api/v1/reports/live/...`` serves them to that
tenant only. A second run from the same checkpoint, after Spark's commit log lost its last
entry (a crash between the sink's write and the commit: Spark runs that batch again), counts
no record twice."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.control_plane.conftest import (  # noqa: F401  (fixtures)
    ControlPlane,
    control_plane,
    control_plane_env,
    http,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
CLUSTER = "sluice-local"


def without_frames(log: str) -> str:
    """``log`` without the JVM's stack frames: the causes are what a failure message needs."""
    return "\n".join(line for line in log.splitlines() if not line.lstrip().startswith("at "))


@pytest.fixture
def control_plane_env() -> dict[str, str]:  # noqa: F811
    return {
        "SLUICE_USAGE_INTERVAL_S": "0.5",
        "SPARK_MASTER": "local[2]",
        "SPARK_SHUFFLE_PARTITIONS": "2",
    }


def test_live_lag_and_throughput_end_to_end(control_plane: ControlPlane, tmp_path):  # noqa: F811
    cp = control_plane
    alpha, bravo = cp.tenant("alpha"), cp.tenant("bravo")
    key = alpha["api_key"]
    broker = cp.start_broker(1)
    status, body = cp.api(
        "POST", "topics/", {"name": "orders", "partitions": 2, "replication_factor": 1}, key=key
    )
    assert status == 201, body

    # not measured yet: nulls, not zeros
    lag = cp.api("GET", "reports/live/lag/?group=billing&topic=orders", key=key)[1]
    assert lag["as_of"] is None and lag["rows"] == []
    assert lag["current"] == [
        {"group_id": "billing", "topic": "orders", "offset_lag": None, "ts": None}
    ]
    tp = cp.api("GET", "reports/live/throughput/?topic=orders", key=key)[1]
    assert tp["as_of"] is None and tp["totals"][0]["records_in"] is None

    def produce(partition: int, n: int):
        return http(
            "POST",
            f"{broker.url}/v3/clusters/{CLUSTER}/topics/orders/records:batch",
            {
                "entries": [
                    {
                        "id": str(i),
                        "partition_id": partition,
                        "value": {"type": "STRING", "data": "x" * 100},
                    }
                    for i in range(n)
                ]
            },
            key=key,
        )

    def commit(offsets: dict[int, int]):
        return http(
            "POST",
            f"{broker.url}/sluice/v1/groups/billing/offsets",
            {
                "offsets": [
                    {"topic": "orders", "partition": p, "offset": o} for p, o in offsets.items()
                ]
            },
            key=key,
        )

    wait_for("alpha's topic on the broker", lambda: produce(0, 10)[0] == 207, timeout=30)
    assert produce(1, 6)[0] == 207
    # the controller creates __consumer_offsets once the broker is up
    wait_for("a group commit", lambda: commit({0: 4, 1: 6})[0] == 200, timeout=30)
    checkpoint = tmp_path / "live"

    def run_live():
        time.sleep(1.5)  # three metering intervals: the windows are in __usage
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "manage.py",
                    "analytics_live",
                    "--available-now",
                    "--checkpoint",
                    str(checkpoint),
                ],
                cwd=ROOT,
                env=cp.env,
                capture_output=True,
                text=True,
                timeout=150,
            )
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"analytics_live hung: {(e.stderr or b'')[-5000:]!r}") from None
        runs = sorted(tmp_path.glob("analytics_live-*.log"))
        (tmp_path / f"analytics_live-{len(runs)}.log").write_text(done.stderr)  # frames and all
        assert done.returncode == 0, without_frames(done.stderr)[-5000:]
        print("\n".join(line for line in done.stderr.splitlines() if "live " in line))

    def stored_bytes() -> int:
        """What the brokers metered as bytes in: the record batches they appended."""
        return sum(
            http("GET", f"{broker.url}/sluice/v1/topics/orders/partitions/{p}/segments", key=key)[
                1
            ]["size_bytes"]
            for p in (0, 1)
        )

    def totals(api_key=key):
        doc = cp.api("GET", "reports/live/throughput/?topic=orders", key=api_key)[1]
        return doc, {t["topic"]: t for t in doc["totals"]}

    run_live()
    lag = cp.api("GET", "reports/live/lag/?group=billing&partitions=true", key=key)[1]
    assert lag["as_of"] is not None and lag["measured_from"] is not None
    ((current,),) = [lag["current"]]
    assert (current["topic"], current["offset_lag"]) == ("orders", 6)
    assert [(r["offset_lag"], r["partitions"], r["measured"]) for r in lag["rows"]] == [(6, 2, 2)]
    by_partition = {p["partition"]: p for p in lag["partitions"]}
    assert {
        p: (r["committed_offset"], r["log_end_offset"], r["offset_lag"])
        for p, r in by_partition.items()
    } == {
        0: (4, 10, 6),
        1: (6, 6, 0),
    }
    doc, tot = totals()
    assert doc["as_of"] is not None
    assert (tot["orders"]["records_in"], tot["orders"]["bytes_in"]) == (16, stored_bytes())
    assert sum(r["records_in"] for r in doc["rows"]) == 16

    # another tenant sees none of it
    other = cp.api("GET", "reports/live/lag/?partitions=true", key=bravo["api_key"])[1]
    assert other["rows"] == other["current"] == other["partitions"] == []
    assert cp.api("GET", "reports/live/throughput/", key=bravo["api_key"])[1]["rows"] == []

    # a crash after the sink wrote the last usage batch but before Spark committed it (its
    # commit-log entry gone), then more traffic and a new commit; the run from the same
    # checkpoint runs that batch again from the state saved before it (the same totals,
    # upserted), then the new records: nothing counted twice
    commits = sorted(
        (checkpoint / "usage" / "spark" / "commits").glob("[0-9]*"), key=lambda p: int(p.name)
    )
    assert commits, "the usage query committed no batch"
    last = commits[-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
    assert produce(0, 4)[0] == 207
    assert commit({0: 14})[0] == 200
    run_live()
    assert last.exists()  # Spark ran that batch again and committed it
    lag = cp.api("GET", "reports/live/lag/?group=billing&topic=orders", key=key)[1]
    assert lag["current"][0]["offset_lag"] == 0
    after = totals()[1]["orders"]
    assert (after["records_in"], after["bytes_in"]) == (20, stored_bytes())

    # as make up runs it: until SIGTERM, sampling every interval; it stops within the
    # runner's bound (15 s) and exits 0
    as_of = cp.api("GET", "reports/live/lag/", key=key)[1]["as_of"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "analytics_live",
            "--interval",
            "1",
            "--checkpoint",
            str(checkpoint),
        ],
        cwd=ROOT,
        env=cp.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert produce(1, 3)[0] == 207
        wait_for(
            "a later lag sample with partition 1's new records",
            lambda: (
                (doc := cp.api("GET", "reports/live/lag/?group=billing", key=key)[1])["as_of"]
                > as_of
                and doc["current"][0]["offset_lag"] == 3
            ),
            timeout=150,
        )
        # a usage window takes a metering interval, then the next micro-batch (a loaded CI
        # machine has taken over a minute for it): the bound is the lag's
        try:
            wait_for(
                "23 records in", lambda: totals()[1]["orders"]["records_in"] == 23, timeout=150
            )
        except AssertionError as e:  # say what the job logged
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            raise AssertionError(
                f"{e}; analytics_live's log: {without_frames(err)[-8000:]}"
            ) from None
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, err[-3000:]
