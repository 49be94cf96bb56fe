"""Fault scenarios under Kafka clients we did not write (issue 21): librdkafka's idempotent
producer (confluent-kafka, enable.idempotence=true, acks=all) under steady load while
leaders and the group coordinator are killed with kill -9 and restarted; afterwards every
partition is read back from the beginning with a librdkafka consumer, every replica's
segment files are read raw, and the history checker (tests/faults/history.py) looks for
lost, misplaced, duplicated, reordered, phantom and divergent records.

Three brokers under a control plane and a controller (default flush policy), each with a
Kafka listener (tests/faults/kafka_cluster.py); topics of three partitions at RF 3, min ISR
2. Short by default (``make test``); ``SLUICE_FAULTS_LONG=1`` (``make faults``) runs longer
load phases and more kills.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.faults.cluster import (
    BROKER_IDS,
    COORDINATOR_FAULT_ENV,
    SESSION_TIMEOUT_S,
    FaultTopic,
)
from tests.faults.conftest import long_run
from tests.faults.history import History, Verdict
from tests.faults.kafka_cluster import KafkaFaultCluster
from tests.faults.kafka_load import (
    KafkaGroupReader,
    KafkaLoadProducer,
    KafkaTailReader,
    committed_offsets,
    group_coordinator,
    read_to_end,
)
from tests.faults.load import read_replicas
from tests.integration.control_plane.conftest import start_control_plane, wait_for

PHASE_S = 3.0 if long_run() else 1.5
RATE = 200.0 if long_run() else 100.0
PARTITIONS = 3
# until a restarted broker is back in every ISR: every kill moves the internal topics'
# leaders too, and on a loaded two-core machine with the HTTP fault cluster still running
# beside this one, 30 s was seen to run out
ISR_WAIT_S = 60


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFaultCluster]:
    """Control plane, controller and three Kafka-listening brokers for this module."""
    with start_control_plane(tmp_path_factory.mktemp("kafka-faults"), COORDINATOR_FAULT_ENV) as cp:
        cluster = KafkaFaultCluster(cp)
        try:
            yield cluster.start()
        finally:
            for b in cluster.brokers.values():
                b.stop()
            cluster.close_proxies()


@pytest.fixture
def cluster(kafka_cluster: KafkaFaultCluster) -> Iterator[KafkaFaultCluster]:
    """The module's cluster, healed (every broker running) around each scenario."""
    kafka_cluster.heal()
    try:
        yield kafka_cluster
    finally:
        kafka_cluster.heal()
        KafkaRun.stop_unfinished()  # a scenario that failed before its finish()


class KafkaRun:
    """A fresh topic under librdkafka's idempotent producer (and, with ``group``, a member
    of that group protocol consuming it); ``finish`` heals, stops the load, reads every
    partition to its end over Kafka, reads every replica raw and checks."""

    unfinished: list[KafkaRun] = []  # runs whose clients may still be running

    def __init__(
        self,
        cluster: KafkaFaultCluster,
        name: str,
        *,
        group: str | None = None,
        tail: bool = False,
    ) -> None:
        self.cluster = cluster
        self.topic: FaultTopic = cluster.create_topic(name, PARTITIONS)
        self.history = History(name)
        self.config = cluster.confluent()
        self.admin = AdminClient(self.config)  # one for the run (see group_coordinator)
        self.producer = KafkaLoadProducer(
            self.history, self.config, name, rate=RATE, prefix=name
        ).start()
        self.tail = (
            KafkaTailReader(self.history, self.config, name, PARTITIONS).start() if tail else None
        )
        self.group = (
            KafkaGroupReader(self.history, self.config, name, f"faults-{name}", group).start()
            if group
            else None
        )
        KafkaRun.unfinished.append(self)

    @classmethod
    def stop_unfinished(cls) -> None:
        """Stop the clients of runs a failed scenario left running, so they neither load the
        next scenario nor poll brokers at interpreter exit; their own failures are the failed
        scenario's, already reported."""
        while cls.unfinished:
            run = cls.unfinished.pop()
            for client in (run.producer, run.tail, run.group):
                if client is not None:
                    with contextlib.suppress(AssertionError, KafkaException):
                        client.stop()

    def kill(self, broker: int) -> None:
        self.history.fault(f"kill -9 broker {broker}")
        self.cluster.kill(broker)

    def finish(self) -> Verdict:
        KafkaRun.unfinished.remove(self)
        self.cluster.heal()
        self.cluster.wait_all_isr(self.topic, 3, timeout=ISR_WAIT_S)
        errors: list[AssertionError] = []
        try:
            self.producer.stop(60)
        except AssertionError as e:
            errors.append(e)
        if self.tail is not None:
            try:
                self.tail.stop()
            except AssertionError as e:
                errors.append(e)
        read_to_end(self.history, self.config, self.topic.name, self.topic.partitions)
        if self.group is not None:
            try:
                self.group.wait_processed(self.history.high_watermarks)
            except AssertionError as e:
                errors.append(e)
            try:
                self.group.stop()
            except AssertionError as e:
                errors.append(e)
        read_replicas(self.history, self.cluster.replica_dirs(self.topic))
        verdict = self.history.check()
        if errors:
            raise AssertionError(f"{verdict.summary()}\n{errors}") from errors[0]
        return verdict

    def assert_producer_kept_going(self, verdict: Verdict) -> None:
        """librdkafka rode through every fault: nothing failed, nothing unanswered, and
        records sent after the last fault were acknowledged."""
        failures = list(self.history.failures.items())[:5]
        assert verdict.failed == 0, f"{verdict.summary()}\nfailed deliveries: {failures}"
        assert not verdict.unknown, f"{verdict.summary()}\nunanswered: {verdict.unknown[:5]}"
        last_fault = self.history.faults[-1][1]
        after = [v for v, (_, _, t) in self.history.attempts.items() if t > last_fault]
        assert any(v in self.history.acks for v in after), "nothing acknowledged after the faults"

    def assert_every_ack_read_once_in_order(self) -> None:
        """The read-back itself (the checker's verdict says the same by value; this says it
        by partition, as the issue does): each partition's records are exactly the
        acknowledged ones, in the producer's send order, at their acknowledged offsets (a
        delivery report without an offset, librdkafka's answer for a batch the broker
        recognised as a duplicate, is checked by value only). The checker's findings first:
        they name the kind of problem (lost, duplicated, ...) that a partition's list shows."""
        verdict = self.history.check()
        problems = {name: found[:5] for name, found in verdict.problems().items()}
        assert not problems, f"{verdict.summary()}\nfirst of each: {problems}"
        acked: dict[int, list[tuple[int, int | None, str]]] = {p: [] for p in self.history.final}
        for value, (p, offset, _) in self.history.acks.items():
            acked.setdefault(p, []).append((self.history.attempts[value][1], offset, value))
        for p, rows in sorted(acked.items(), key=lambda kv: str(kv[0])):
            rows.sort(key=lambda r: r[0])
            offsets = [offset for _, offset, _ in rows if offset is not None]
            assert offsets == sorted(offsets), f"partition {p}: offsets not in send order"
            final = self.history.final.get(p, [])
            read, sent = [v for _, v in final], [v for _, _, v in rows]
            assert read == sent, (
                f"partition {p}: read back {len(read)} records, {len(sent)} acknowledged; "
                f"{self._differences(read, sent)}"
            )
            wrong = [
                (value, offset, at)
                for (at, _), (_, offset, value) in zip(final, rows, strict=True)
                if offset is not None and offset != at
            ]
            assert not wrong, f"partition {p}: (value, reported, read at) {wrong[:5]}"

    def _differences(self, read: list[str], sent: list[str]) -> str:
        """Where the read-back and the acknowledged list part, with what the producer's
        delivery reports said of each value involved."""
        first = next((i for i, (a, b) in enumerate(zip(read, sent, strict=False)) if a != b), None)
        only_read = sorted(set(read) - set(sent))[:5]
        only_sent = sorted(set(sent) - set(read))[:5]
        reports = {
            v: self.history.acks.get(v) or self.history.failures.get(v)
            for v in only_read + only_sent
        }
        return (
            f"first difference at index {first}; read but not acknowledged here {only_read}; "
            f"acknowledged here but not read {only_sent}; their reports "
            f"(partition, offset, time) {reports}"
        )


def coordinator_of(run: KafkaRun, group_id: str) -> int | None:
    """The group's coordinator now; None while no broker answers for it."""
    try:
        return group_coordinator(run.admin, group_id)
    except KafkaException:
        return None


def test_leader_killed_under_idempotent_producer(cluster: KafkaFaultCluster, report) -> None:
    """kill -9 of a partition's leader under librdkafka's idempotent producer, restarted
    each time (twice shortened, on different partitions; four times at full length): the
    producer rides through (NOT_LEADER_OR_FOLLOWER / broken connections, Metadata, the
    same producer id and sequences to the new leader), nothing is lost, duplicated or
    reordered, and the delivery reports' offsets are where the records are."""
    run = KafkaRun(cluster, "kafka-kill-leader", tail=True)
    kills = 4 if long_run() else 2
    killed = []
    for i in range(kills):
        time.sleep(PHASE_S)
        # a restarted replica is ineligible until it rejoins the ISR: wait for that, or
        # the next kill could leave a partition (rightly) offline
        cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
        partition = i % PARTITIONS
        leader = cluster.wait_leader(run.topic, partition)
        run.kill(leader)
        killed.append(leader)
        cluster.wait_leader(run.topic, partition, not_in=(leader,))
        time.sleep(PHASE_S / 2)
        cluster.restart(leader)
    time.sleep(PHASE_S)
    verdict = run.finish()
    assert verdict.acknowledged > 0
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    assert run.tail is not None and run.tail.reads > 0, "the tailing consumer read nothing"
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        client="confluent-kafka " + __import__("confluent_kafka").libversion()[0],
        killed=killed,
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
        tail_reads=run.tail.reads if run.tail else 0,
        tail_errors=dict(run.tail.errors) if run.tail else {},
    )


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_coordinator_killed_under_consumer_group(
    cluster: KafkaFaultCluster, report, protocol: str
) -> None:
    """A librdkafka group member (the classic protocol, then KIP-848's) consumes and
    commits (synchronously, after processing) while the group coordinator's broker is
    killed with kill -9 and restarted (once shortened, twice at full length), under the
    idempotent producer: the member finds the new coordinator, committed offsets are never
    ahead of what it processed nor moved back, and it processes every acknowledged record
    (none skipped)."""
    run = KafkaRun(cluster, f"kafka-kill-{protocol}-coordinator", group=protocol)
    group = run.group
    assert group is not None
    wait_for("the group's first commit", lambda: group.commits > 0, 30)
    kills = 2 if long_run() else 1
    killed, moved_to = [], []
    for _ in range(kills):
        time.sleep(PHASE_S)
        cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
        coordinator = group_coordinator(run.admin, group.group_id)
        commits = group.commits
        run.kill(coordinator)
        killed.append(coordinator)
        # the group's offsets partition gets a new leader: another broker coordinates
        moved_to.append(
            wait_for(
                "another coordinator",
                lambda old=coordinator: (
                    coordinator_of(run, group.group_id) not in (None, old)
                    and coordinator_of(run, group.group_id)
                ),
                30,
            )
        )
        time.sleep(PHASE_S / 2)
        cluster.restart(coordinator)
        # commits go through again (to whichever broker coordinates the group now)
        wait_for("a commit after the coordinator's kill", lambda n=commits: group.commits > n, 60)
    time.sleep(PHASE_S)
    verdict = run.finish()
    assert verdict.acknowledged > 0
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    assert group.lookups > 0, "the committed offsets were never looked up"
    assert not group.ahead, f"committed offsets ahead of the processed ones: {group.ahead[:10]}"
    assert not group.moved_back, f"committed offsets moved back: {group.moved_back[:10]}"
    # every commit the coordinators acknowledged survived their kills: a member starting
    # now resumes no earlier than that (a commit whose answer was lost may be there too)
    # and never beyond what was processed
    after = committed_offsets(run.config, group.group_id, run.topic.name, PARTITIONS)
    for p in range(PARTITIONS):
        acked, processed = group.acked.get(p, -1001), group.processed.get(p, 0)
        assert acked <= after[p] <= processed, (
            f"partition {p}: committed now {after[p]}, acknowledged {acked}, "
            f"processed up to {processed}"
        )
    skipped = {
        value: (p, offset)
        for value, (p, offset, _) in run.history.acks.items()
        if offset not in group.offsets_read[p]
    }
    assert not skipped, f"acknowledged, never processed by the group: {list(skipped.items())[:10]}"
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        killed_coordinators=killed,
        new_coordinators=moved_to,
        group_commits=group.commits,
        group_reprocessed=group.reprocessed,
        group_retried=dict(group.retried),
        group_offsets_moved_back=0,
        group_offsets_ahead=0,
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
    )


def test_leader_and_follower_killed_at_once(cluster: KafkaFaultCluster, report) -> None:
    """kill -9 of a partition's leader and a follower at once under the idempotent
    producer: the survivor leads every partition below min ISR (acks=all answers
    NOT_ENOUGH_REPLICAS, which librdkafka retries) until the two restart and rejoin; then
    everything acknowledged is there once, in order."""
    run = KafkaRun(cluster, "kafka-kill-two")
    time.sleep(PHASE_S)
    cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
    leader = cluster.wait_leader(run.topic)
    victims = [leader, next(b for b in BROKER_IDS if b != leader)]
    run.history.fault(f"kill -9 brokers {victims} at once")
    for b in victims:
        cluster.kill(b)
    # a record sent after both are dead has one live replica until they restart (one sent
    # between the two kills may have reached the second victim: legitimately acknowledged
    # once the ISR shrinks to it and the survivor)
    killed_at = time.monotonic()
    survivor = next(b for b in BROKER_IDS if b not in victims)
    for p in range(PARTITIONS):
        assert cluster.wait_leader(run.topic, p, not_in=victims, timeout=30) == survivor
    time.sleep(PHASE_S)
    during = run.history.acks_between(killed_at, time.monotonic())
    late = [v for v in during if run.history.attempts[v][2] >= killed_at]
    for b in victims:
        cluster.restart(b)
    time.sleep(PHASE_S)
    verdict = run.finish()
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    assert not late, f"sent after the kill, acknowledged by one live replica: {late[:10]}"
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        killed_at_once=victims,
        acknowledged_while_two_down=len(during),
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
    )


def test_paused_leader_under_idempotent_producer(cluster: KafkaFaultCluster, report) -> None:
    """SIGSTOP of a leader past the session timeout while librdkafka has produce requests in
    flight to it, then SIGCONT: a new leader takes over; requests the old one finds in its
    socket backlog when it resumes must not be acknowledged, and the producer's retries of
    them (same producer id and sequences, to the new leader) are written once, in order."""
    run = KafkaRun(cluster, "kafka-pause-leader", tail=True)
    time.sleep(PHASE_S)
    cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
    leader = cluster.wait_leader(run.topic)
    run.history.fault(f"SIGSTOP broker {leader}")
    cluster.pause(leader)
    new = cluster.wait_leader(run.topic, not_in=(leader,), timeout=SESSION_TIMEOUT_S + 20)
    time.sleep(PHASE_S)
    cluster.resume(leader)
    time.sleep(PHASE_S)
    verdict = run.finish()
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        paused=leader,
        new_leader=new,
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
        tail_errors=dict(run.tail.errors) if run.tail else {},
    )


def test_lost_acknowledgements_and_a_leader_kill(cluster: KafkaFaultCluster, report) -> None:
    """Produce answers lost on the way back (a share of the answer chunks dropped with the
    connection closed, on every broker's Kafka link) while a leader is killed: librdkafka
    retries batches the brokers already wrote, with the same producer id and sequences, to
    the same leader or the new one; each is written once and its delivery report carries
    the offsets of the first write."""
    run = KafkaRun(cluster, "kafka-lost-answers")
    time.sleep(PHASE_S)
    run.history.fault("drop 10% of the Kafka answers")
    for proxy in cluster.kafka_net.values():
        proxy.drop_rate = 0.1
    time.sleep(PHASE_S)
    cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
    leader = cluster.wait_leader(run.topic)
    run.kill(leader)
    cluster.wait_leader(run.topic, not_in=(leader,))
    time.sleep(PHASE_S)
    cluster.restart(leader)
    time.sleep(PHASE_S)
    dropped = sum(proxy.dropped for proxy in cluster.kafka_net.values())
    for proxy in cluster.kafka_net.values():
        proxy.drop_rate = 0.0
    time.sleep(PHASE_S / 2)
    verdict = run.finish()
    assert dropped > 0, "no answer was dropped"
    # batches whose answers were lost reached a broker again with their sequences
    assert cluster.resent(run.topic.name) > 0, "no batch was sent again"
    unparsed = sum(tap.unparsed for tap in cluster.kafka_net.values())
    assert unparsed == 0, f"the taps could not read {unparsed} requests"
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        answers_dropped=dropped,
        killed=leader,
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
    )


def test_every_broker_killed_under_idempotent_producer(cluster: KafkaFaultCluster, report) -> None:
    """kill -9 of every broker at once under the idempotent producer, then all restarted:
    the brokers rebuild each producer's state (id, epoch, last sequences) from their logs,
    so librdkafka's retries of the batches in flight at the crash (same producer id and
    sequences) are deduplicated and the next ones accepted in order. Runs last: if recovery
    fails, the module's partitions stay offline."""
    run = KafkaRun(cluster, "kafka-kill-all", tail=True)
    time.sleep(PHASE_S)
    cluster.wait_all_isr(run.topic, 3, timeout=ISR_WAIT_S)
    run.history.fault("kill -9 every broker")
    cluster.kill_all()
    time.sleep(PHASE_S / 2)
    for b in BROKER_IDS:
        cluster.restart(b)
    started = time.monotonic()
    cluster.wait_all_isr(run.topic, 3, timeout=90)
    back_s = time.monotonic() - started
    time.sleep(PHASE_S)
    verdict = run.finish()
    run.assert_producer_kept_going(verdict)
    run.assert_every_ack_read_once_in_order()
    report(
        verdict,
        batches_resent=cluster.resent(run.topic.name),
        seconds_until_every_partition_led=round(back_s, 2),
        librdkafka_errors=dict(run.producer.errors),
        librdkafka_retries=run.producer.retries,
    )
