"""The transactions fault scenario (issue 26): librdkafka's transactional producer in a
consume-transform-produce loop (tests/faults/txn_loop.py, a process per incarnation, one
transactional id) while kill -9 hits the worker mid-transaction and during EndTxn, the
transaction coordinator's broker and an output partition's leader, and (at full length) a
paused worker is fenced by its successor and resumed as a zombie. Afterwards the output is
read back read_committed and the checker (tests/faults/txn_history.py) looks for reads of
aborted or unfinished transactions, partial commits, inputs output twice or never, and
offsets not committed with their transaction.

Three brokers under a control plane and a controller, each with a Kafka listener
(tests/faults/kafka_cluster.py); topics of three partitions at RF 3, min ISR 2, the internal
topics at RF 3. Short by default (``make test``: the worker killed twice and the
coordinator once); ``SLUICE_FAULTS_LONG=1`` (``make faults``) adds the leader kill, the
zombie and more input.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from tests.faults.cluster import BROKER_IDS, COORDINATOR_FAULT_ENV
from tests.faults.conftest import long_run
from tests.faults.kafka_cluster import KafkaFaultCluster
from tests.faults.kafka_load import KafkaTailReader, committed_offsets
from tests.faults.txn_history import TxnHistory, TxnVerdict
from tests.integration.control_plane.conftest import start_control_plane, wait_for
from tests.integration.kafka.cp_kafka import sasl
from tests.integration.kafka.data_plane_wire import KafkaWire

PARTITIONS = 3
INPUTS = 1500 if long_run() else 300
WORKER = Path(__file__).with_name("txn_loop.py")
ROOT = Path(__file__).resolve().parents[2]
TID, GROUP = "faults-ctp", "faults-ctp-group"
EVENT_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFaultCluster]:
    """Control plane, controller and three Kafka-listening brokers; the internal topics
    (``__transaction_state``, ``__consumer_offsets``) wait for all three brokers."""
    env = COORDINATOR_FAULT_ENV
    with start_control_plane(tmp_path_factory.mktemp("txn-faults"), env) as cp:
        cluster = KafkaFaultCluster(cp)
        try:
            yield cluster.start()
        finally:
            for b in cluster.brokers.values():
                b.stop()
            cluster.close_proxies()


class Worker:
    """The worker's incarnations: start, read their events, kill, pause, resume."""

    def __init__(self, cluster: KafkaFaultCluster, workdir: Path, conf: dict) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.conf = conf
        self.procs: dict[int, subprocess.Popen] = {}
        self.incarnation = 0
        self.die_in_commit = workdir / "die-in-commit"
        self.conf["die_in_commit"] = str(self.die_in_commit)

    def start(self) -> int:
        self.incarnation += 1
        inc = self.incarnation
        conf = {**self.conf, "incarnation": inc}
        out = (self.workdir / f"worker-{inc}.jsonl").open("w")
        err = (self.workdir / f"worker-{inc}.log").open("w")
        self.procs[inc] = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(conf)],
            stdout=out,
            stderr=err,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        out.close()
        err.close()
        return inc

    def events(self, inc: int) -> list[dict]:
        path = self.workdir / f"worker-{inc}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.endswith("}")]

    def wait_event(self, inc: int, ev: str, after: int = 0, timeout=EVENT_TIMEOUT_S) -> dict:
        """The first ``ev`` event of incarnation ``inc`` past its ``after``-th event."""

        def seen():
            found = [e for e in self.events(inc)[after:] if e["ev"] == ev]
            if not found and self.procs[inc].poll() is not None:
                raise AssertionError(f"worker {inc} exited {self.procs[inc].returncode}")
            return found[0] if found else None

        return wait_for(f"worker {inc} to print {ev}", seen, timeout)

    def signal(self, inc: int, sig: int) -> None:
        self.procs[inc].send_signal(sig)

    def kill(self, inc: int) -> None:
        self.procs[inc].kill()
        self.procs[inc].wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(10)

    def record(self, history: TxnHistory) -> dict[str, int]:
        """Every incarnation's events into the history; returns the exit codes."""
        codes = {}
        for inc in sorted(self.procs):
            asked = set()
            for e in self.events(inc):
                if e["ev"] == "start":
                    history.resume(inc, {int(p): o for p, o in e["committed"].items()})
                elif e["ev"] == "txn":
                    history.begin(
                        e["key"],
                        e["outputs"],
                        {int(p): o for p, o in e["before"].items()},
                        {int(p): o for p, o in e["after"].items()},
                    )
                elif e["ev"] == "commit":
                    asked.add(e["key"])
                    history.outcome(e["key"], "unknown")
                elif e["ev"] in ("committed", "aborted", "fenced"):
                    history.outcome(e["key"], e["ev"])
            codes[f"incarnation {inc}"] = self.procs[inc].poll()
        return codes


def transaction_coordinator(cluster: KafkaFaultCluster, tid: str) -> int | None:
    """The broker coordinating ``tid`` now (FindCoordinator key type 1, asked of a running
    broker); None while none answers for it."""
    user, secret = sasl(cluster.api_key)
    for b in BROKER_IDS:
        if not cluster.running(b):
            continue
        try:
            with KafkaWire(f"127.0.0.1:{cluster.kafka_net[b].port}", user, secret) as wire:
                a = wire.request(
                    apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]}
                )
        except (OSError, AssertionError):
            continue
        (c,) = a["coordinators"]
        return c["node_id"] if c["error_code"] == kerr.NONE else None
    return None


def produce_inputs(config: dict, topic: str, history: TxnHistory) -> None:
    """``i<k>`` to partition ``k % partitions``, idempotent, acks=all; records each input's
    offset from its delivery report."""
    producer = Producer({**config, "enable.idempotence": True, "linger.ms": 5})

    def delivered(error, msg) -> None:
        assert error is None, error
        history.inputs[(msg.partition(), msg.offset())] = msg.value().decode()

    for k in range(INPUTS):
        producer.produce(topic, f"i{k}".encode(), partition=k % PARTITIONS, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    for p in range(PARTITIONS):
        history.input_ends[p] = 1 + max(o for q, o in history.inputs if q == p)


def read_output(config: dict, topic: str, isolation: str) -> list[tuple[int, int, str]]:
    """Every partition from its start to its end (the LSO under read_committed)."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"drain-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    rows: list[tuple[int, int, str]] = []
    try:
        ends = {}
        for p in range(PARTITIONS):
            # read_committed's end is the LSO: with nothing open it is the high watermark
            _, ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 60
        # positions, not the last record's offset: every partition ends with a marker
        while any(tp.offset < ends[tp.partition] for tp in consumer.position(tps)):
            assert time.monotonic() < deadline, f"{topic} not read to {ends}"
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    rows.append((msg.partition(), msg.offset(), msg.value().decode()))
        end = time.monotonic() + 1.5  # anything past the ends would show now
        while time.monotonic() < end:
            rows += [
                (m.partition(), m.offset(), m.value().decode())
                for m in consumer.consume(500, 0.3)
                if m.error() is None
            ]
    finally:
        consumer.close()
    return rows


def test_consume_transform_produce_under_kills(
    txn_cluster: KafkaFaultCluster, report, tmp_path: Path
) -> None:
    """Kill -9 of the worker with a transaction open and during its EndTxn, of the
    transaction coordinator and (full length) of an output partition's leader, and a zombie
    worker fenced by its successor: every input's output is read exactly once by
    read_committed readers, aborted, unfinished and fenced transactions' outputs never, no
    transaction partly, and the group's offsets move with the outputs."""
    cluster = txn_cluster
    cluster.heal()
    name = "txn-ctp"
    topic_in = cluster.create_topic(f"{name}-in", PARTITIONS)
    topic_out = cluster.create_topic(f"{name}-out", PARTITIONS)
    history = TxnHistory(name)
    config = cluster.confluent()
    produce_inputs(config, topic_in.name, history)
    worker = Worker(
        cluster,
        tmp_path,
        {
            "client": {k: v for k, v in config.items() if k != "logger"},
            "input": topic_in.name,
            "output": topic_out.name,
            "partitions": PARTITIONS,
            "ends": history.input_ends,
            "group": GROUP,
            "transactional_id": TID,
            "batch": 12,
            "delay_s": 0.1,
            "abort_every": 7,
        },
    )
    tail = KafkaTailReader(
        history, {**config, "isolation.level": "read_committed"}, topic_out.name, PARTITIONS
    ).start()
    faults: list[str] = []
    try:
        inc = worker.start()
        worker.wait_event(inc, "committed")
        # the worker killed with a transaction open (its outputs in the log, undecided)
        n = len(worker.events(inc))
        worker.wait_event(inc, "flushed", after=n)
        worker.kill(inc)
        faults.append("kill -9 worker mid-transaction")
        inc = worker.start()
        worker.wait_event(inc, "committed")
        # the transaction coordinator's broker killed under a running worker
        coordinator = wait_for("the coordinator", lambda: transaction_coordinator(cluster, TID))
        n = len(worker.events(inc))
        worker.wait_event(inc, "flushed", after=n)
        cluster.kill(coordinator)
        faults.append(f"kill -9 transaction coordinator (broker {coordinator})")
        wait_for(
            "another coordinator",
            lambda: transaction_coordinator(cluster, TID) not in (None, coordinator),
            30,
        )
        cluster.restart(coordinator)
        worker.wait_event(inc, "committed", after=n)
        cluster.wait_all_isr(topic_out, 3, timeout=30)
        # the worker killed during EndTxn (by SIGKILL a few ms into its next commit)
        worker.die_in_commit.touch()
        wait_for("the worker killed in a commit", lambda: worker.procs[inc].poll() == -9, 60)
        last = [e["ev"] for e in worker.events(inc)][-1]
        assert last in ("commit", "committed"), f"killed after {last!r}"
        faults.append(f"kill -9 worker during EndTxn (last event: {last})")
        inc = worker.start()
        worker.wait_event(inc, "committed")
        if long_run():
            # an output partition's leader killed mid-transaction
            cluster.wait_all_isr(topic_out, 3, timeout=30)
            leader = cluster.wait_leader(topic_out, 1)
            n = len(worker.events(inc))
            worker.wait_event(inc, "flushed", after=n)
            cluster.kill(leader)
            faults.append(f"kill -9 leader of {topic_out.name}-1 (broker {leader})")
            cluster.wait_leader(topic_out, 1, not_in=(leader,))
            worker.wait_event(inc, "committed", after=n)
            cluster.restart(leader)
            cluster.wait_all_isr(topic_out, 3, timeout=30)
            # a zombie: paused mid-transaction, fenced by its successor, then resumed
            n = len(worker.events(inc))
            worker.wait_event(inc, "flushed", after=n)
            worker.signal(inc, signal.SIGSTOP)
            zombie = inc
            inc = worker.start()
            worker.wait_event(inc, "committed")
            worker.signal(zombie, signal.SIGCONT)
            faults.append("zombie worker resumed after its successor started")
            worker.wait_event(zombie, "fenced", after=n)
        # the last incarnation finishes the input
        wait_for(f"worker {inc} to finish", lambda: worker.procs[inc].poll() is not None, 180)
        assert worker.procs[inc].returncode == 0, (tmp_path / f"worker-{inc}.log").read_text()
    finally:
        worker.stop_all()
        cluster.heal()
    tail.stop()
    codes = worker.record(history)
    cluster.wait_all_isr(topic_out, 3, timeout=30)
    history.final = read_output(config, topic_out.name, "read_committed")
    in_log = read_output(config, topic_out.name, "read_uncommitted")
    history.committed_offsets = committed_offsets(config, GROUP, topic_in.name, PARTITIONS)
    verdict: TxnVerdict = history.check()
    verdict.replicas_compared = sum(
        len(BROKER_IDS) for p in range(PARTITIONS) if cluster.wait_replicas_equal(topic_out, p)
    )
    never = sum(verdict.transactions.get(o, 0) for o in ("aborted", "fenced", "open"))
    assert never > 0 and len(in_log) > len(history.final), "no aborted output in the log"
    assert tail.reads > 0, "the tailing read_committed consumer read nothing"
    report(
        verdict,
        faults=faults,
        exits=codes,
        outputs_in_log_read_uncommitted=len(in_log),
        tail_reads=tail.reads,
        client="confluent-kafka " + __import__("confluent_kafka").libversion()[0],
    )
