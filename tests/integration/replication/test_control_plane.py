"""Replication under the control plane and its controller: controlled shutdown moves
leadership away before a broker stops; the SDK and the CLI follow a leader that was killed;
registration carries broker epochs and clean-shutdown flags."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from brokernodes.client.producer import Producer
from tests.faults.cluster import BROKER_IDS, FAULT_ENV, FaultCluster
from tests.integration.control_plane.conftest import ROOT, start_control_plane, wait_for
from tests.integration.replication.cluster import log_records


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[FaultCluster]:
    with start_control_plane(tmp_path_factory.mktemp("replication"), FAULT_ENV) as cp:
        yield FaultCluster(cp).start()


@pytest.fixture
def cluster(shared: FaultCluster) -> Iterator[FaultCluster]:
    shared.heal()
    yield shared
    shared.heal()


def led_by(cluster: FaultCluster, topic, broker: int) -> list[int]:
    return [p for p in range(topic.partitions) if cluster.leader(topic, p) == broker]


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(cluster: FaultCluster):
    topic = cluster.create_topic("orders", partitions=3)
    victim = cluster.leader(topic, 0)
    assert led_by(cluster, topic, victim)
    for p in range(3):
        cluster.wait_isr(topic, 3, partition=p)
    b = cluster.brokers[victim]
    cluster.stop(victim)
    assert b.proc is not None and b.proc.returncode == 0, b.output()
    assert "controlled shutdown: leadership moved away" in b.output(), b.output()
    assert led_by(cluster, topic, victim) == []
    # the two left still take acks=all (ISR 2 = min ISR)
    with Producer(
        ",".join(cluster.brokers[x].url for x in BROKER_IDS if x != victim),
        cluster.api_key,
        acks="all",
        enable_idempotence=True,
    ) as producer:
        futures = [producer.send("orders", f"v{i}".encode(), partition=i % 3) for i in range(30)]
        producer.flush(30)
        assert all(f.result(0).offset >= 0 for f in futures)
    # it comes back cleanly (markers written): it rejoins every ISR
    cluster.restart(victim)
    for p in range(3):
        cluster.wait_isr(topic, 3, partition=p)


def test_sdk_and_cli_follow_a_killed_leader(cluster: FaultCluster):
    topic = cluster.create_topic("events", partitions=1)
    cluster.wait_isr(topic, 3)
    urls = ",".join(cluster.urls)
    env = {**os.environ, "SLUICE_URL": urls, "SLUICE_API_KEY": cluster.api_key}

    def cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "brokernodes.cli", *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
        )

    done = cli("produce", "events", "--acks", "all", stdin="a\nb\nc\n")
    assert done.returncode == 0, done.stderr
    leader = cluster.leader(topic)
    cluster.kill(leader)
    # the first bootstrap URL may be the dead leader: refused, refreshed, retried
    done = cli("produce", "events", "--acks", "all", stdin="d\ne\n")
    assert done.returncode == 0, done.stderr
    assert cluster.leader(topic) != leader
    done = cli("consume", "events", "--from-beginning", "--timeout", "20", "-n", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["a", "b", "c", "d", "e"]
    # the killed broker restarts uncleanly, catches up and rejoins the ISR
    cluster.restart(leader)
    cluster.wait_isr(topic, 3)
    wait_for(
        "the restarted replica to hold every record",
        lambda: len(log_records(cluster.partition_dir(leader, topic))) == 5,
    )
