"""``SPARK_MASTER=spark://...`` sends the same jobs to a standalone cluster: a master and a
worker started with pyspark's ``spark-class`` on loopback (once for the module) run the lag
job over a real broker, whose answer matches the workload's ground truth, and a streaming
query with the ``sluice`` source, whose file sink holds every record of the log once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from brokernodes.groups.records import encode_offset_commit
from brokernodes.groups.types import OffsetAndMetadata, OffsetKey
from brokernodes.records.batch import Record, encode_batch
from tests.integration.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
BATCH = "application/vnd.kafka.recordbatch.v2"
MINUTE = 60_000
T0 = int(time.time() * 1000) // MINUTE * MINUTE - 5 * MINUTE
NOW = T0 + 5 * MINUTE

pytestmark = pytest.mark.slow


def _start(argv, log: Path, env) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _wait_log(proc, log: Path, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.3)
    raise AssertionError(f"no {text!r} within {timeout}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@dataclass(frozen=True)
class Cluster:
    master: str
    work_dir: Path
    env: dict


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A master and a worker (2 cores, 1 GiB) on loopback for the module's tests."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_SHUFFLE_PARTITIONS": "2",  # a small job: fewer tasks
    }
    master_port, worker_port = free_port(), free_port()
    procs = []
    try:
        procs.append(
            _start(
                [
                    str(SPARK_CLASS),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(master_port),
                    "--webui-port",
                    str(free_port()),
                ],
                tmp_path / "master.log",
                env,
            )
        )
        _wait_log(procs[0], tmp_path / "master.log", "I have been elected leader")
        master = f"spark://127.0.0.1:{master_port}"
        procs.append(
            _start(
                [
                    str(SPARK_CLASS),
                    "org.apache.spark.deploy.worker.Worker",
                    master,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(worker_port),
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    "2",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(tmp_path / "work"),
                ],
                tmp_path / "worker.log",
                env,
            )
        )
        _wait_log(procs[1], tmp_path / "worker.log", "Successfully registered with master")
        yield Cluster(master, tmp_path / "work", env)
    finally:
        for p in reversed(procs):
            _stop(p)


def test_lag_job_on_a_standalone_cluster(broker_factory, cluster):
    broker = broker_factory({"orders": (1, {}), "__consumer_offsets": (1, {})})

    def produce(topic, records):
        status, _, body = broker.request(
            "POST",
            f"/sluice/v1/topics/{topic}/partitions/0/batches",
            encode_batch(records),
            headers={"Content-Type": BATCH},
        )
        assert status == 200, body

    stamps = list(range(T0, NOW, 500))  # 2 records a second for 5 minutes
    produce("orders", [Record(t, None, b"v") for t in stamps])
    commits = []
    for t in range(T0 + 10_000, NOW + 1, 10_000):
        end = sum(1 for s in stamps if s <= t)
        commits.append(("healthy", t, end))
        if t <= T0 + 2 * MINUTE:
            commits.append(("stopped", t, end))
    produce(
        "__consumer_offsets",
        [
            Record(
                t, *encode_offset_commit(OffsetKey(g, "orders", 0), OffsetAndMetadata(o, 0, "", t))
            )
            for g, t, o in commits
        ],
    )

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark.jobs",
            "lag",
            "--bootstrap",
            broker.url,
            "--api-key",
            broker.api_key,
            "--topic",
            "orders",
            "--now-ms",
            str(NOW),
        ],
        cwd=ROOT,
        env={**cluster.env, "SPARK_MASTER": cluster.master},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["master"] == cluster.master
    status = {r["group"]: r for r in out["status"]}
    assert status["healthy"]["status"] == "OK" and status["healthy"]["offset_lag"] == 0
    assert status["stopped"]["status"] == "STOP"
    assert status["stopped"]["offset_lag"] == len(stamps) - sum(
        1 for s in stamps if s <= T0 + 2 * MINUTE
    )
    # the executors on the worker ran the DataSource reads (an app ran on the worker)
    assert list(cluster.work_dir.glob("app-*")), "no application ran on the worker"


def test_streaming_source_on_a_standalone_cluster(broker_factory, cluster, tmp_path):
    """3,000 records in 3 partitions read by a streaming query on the cluster's executors,
    1,000 offsets per micro-batch, into a Parquet file sink: each record once."""
    broker = broker_factory({"clicks": (3, {})})
    sizes = {0: 1500, 1: 1000, 2: 500}
    for p, n in sizes.items():
        for lo in range(0, n, 250):
            status, _, body = broker.request(
                "POST",
                f"/sluice/v1/topics/clicks/partitions/{p}/batches",
                encode_batch(
                    [Record(T0 + i, None, b"c%d-%d" % (p, i)) for i in range(lo, lo + 250)]
                ),
                headers={"Content-Type": BATCH},
            )
            assert status == 200, body
    apps_before = set(cluster.work_dir.glob("app-*"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark.stream_job",
            broker.url,
            broker.api_key,
            "clicks",
            str(tmp_path / "stream"),
            "1000",
        ],
        cwd=ROOT,
        env={**cluster.env, "SPARK_MASTER": cluster.master},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["master"] == cluster.master
    batches = out["batches"]  # maxOffsetsPerTrigger, spread by backlog (shares round down)
    assert len(batches) >= 3 and max(batches) <= 1000 and sum(batches) == 3000, batches
    assert [tuple(r) for r in out["rows"]] == sorted(
        (p, i, f"c{p}-{i}") for p, n in sizes.items() for i in range(n)
    )
    assert set(cluster.work_dir.glob("app-*")) - apps_before, "no application ran on the worker"
