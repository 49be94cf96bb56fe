"""Load and reads for fault scenarios through Kafka's protocol, with librdkafka
(confluent-kafka) on both ends: an idempotent acks=all producer under steady load, a
classic-protocol consumer-group member committing what it processed, and the final read of
every partition from the beginning to its high watermark. Everything records into a
``History`` (tests/faults/history.py); every wait is bounded.

Nothing is swallowed: a worker that dies keeps its error and ``stop`` raises it; librdkafka's
fatal errors (an idempotent producer that can no longer guarantee order) fail the
scenario. What failover is expected to produce (connections refused, NOT_COORDINATOR, a
commit refused because a rebalance fenced the member) is retried and counted."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from tests.faults.history import History
from tests.faults.load import Worker

CLIENT_TIMEOUT_S = 10.0


class KafkaLoadProducer:
    """Sends unique values ``<prefix>-<n>`` (key = value, n in send order) at a steady rate
    with librdkafka's idempotent producer; delivery reports record the acknowledged
    partition and offset. librdkafka retries through failover by itself (the message
    timeout is far above a failover), so a failed delivery is an outcome to report."""

    def __init__(
        self, history: History, config: dict, topic: str, *, rate: float, prefix: str
    ) -> None:
        self.history = history
        self.topic = topic
        self.rate = rate
        self.prefix = prefix
        self.errors: Counter[str] = Counter()  # librdkafka's non-fatal errors, by name
        self.fatal: list[str] = []
        self.producer = Producer(
            {
                **config,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "request.timeout.ms": 5_000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 500,
                "error_cb": self._error,
                "statistics.interval.ms": 500,
                "stats_cb": self._stats,
            }
        )
        self.retries = 0  # produce requests librdkafka sent again (its statistics)
        self.sent = 0
        self.unflushed = 0
        self._stop = threading.Event()
        self._worker = Worker(f"kafka-load-{prefix}", self._run)

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))
        else:
            self.errors[error.name()] += 1

    def _stats(self, doc: str) -> None:
        brokers = json.loads(doc).get("brokers", {}).values()
        self.retries = max(self.retries, sum(b.get("txretries", 0) for b in brokers))

    def _delivered(self, error: KafkaError | None, msg) -> None:
        value = msg.value().decode()
        if error is not None:
            self.history.fail(value, KafkaException(error))
        else:
            self.history.ack(value, msg.partition(), msg.offset())

    def start(self) -> KafkaLoadProducer:
        self._worker.start()
        return self

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        i = 0
        while not self._stop.is_set() and not self.fatal:
            value = f"{self.prefix}-{i}"
            self.history.attempt(value, self.prefix, i)
            data = value.encode()
            while True:  # a full local queue waits for deliveries, bounded by stop
                try:
                    self.producer.produce(self.topic, data, data, on_delivery=self._delivered)
                    break
                except BufferError:
                    self.producer.poll(0.1)
                    if self._stop.is_set():
                        self.history.fail(value, RuntimeError("local queue full at stop"))
                        return
            i += 1
            self.sent = i
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def stop(self, flush_timeout: float = 60.0) -> None:
        """Stop sending and wait for every delivery report; what is still unanswered after
        ``flush_timeout`` stays unknown in the history (reported, not dropped)."""
        self._stop.set()
        self._worker.join(10)
        self.unflushed = self.producer.flush(flush_timeout)
        if not self.unflushed:
            self.producer.close()
        if self.fatal:
            raise AssertionError(f"librdkafka's idempotent producer failed: {self.fatal}")


def read_to_end(
    history: History, config: dict, topic: str, partitions: int, *, timeout: float = 60.0
) -> None:
    """Every partition from its first offset to its high watermark with a librdkafka
    consumer (assigned, no group), into ``history.final`` and ``history.high_watermarks``.
    Offsets must rise within a partition (a consumer never goes back by itself)."""
    consumer = Consumer({**config, "group.id": f"drain-{topic}", "enable.auto.commit": False})
    try:
        ends = {}
        for p in range(partitions):
            _, ends[p] = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=CLIENT_TIMEOUT_S
            )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        position = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"could not read {topic} to its ends {ends} within {timeout} s (at {position})"
                )
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    if msg.error().fatal() or not msg.error().retriable():
                        raise KafkaException(msg.error())
                    continue
                p, offset = msg.partition(), msg.offset()
                assert offset >= position[p], f"{topic}-{p}: read {offset} after {position[p]}"
                if offset < ends[p]:
                    records[p].append((offset, msg.value().decode()))
                position[p] = offset + 1
        for p in range(partitions):
            history.final[p] = records[p]
            history.high_watermarks[p] = ends[p]
    finally:
        consumer.close()


class KafkaTailReader:
    """A librdkafka consumer assigned every partition from the beginning (no group),
    tailing them while the faults run; every read goes into ``history.read`` (a read the
    final log holds differently, or above the high watermark and then gone, is divergent).
    After a leader change librdkafka validates its positions with OffsetForLeaderEpoch."""

    def __init__(self, history: History, config: dict, topic: str, partitions: int) -> None:
        self.history = history
        self.errors: Counter[str] = Counter()
        self.reads = 0
        self.consumer = Consumer(
            {
                **config,
                "group.id": f"tail-{topic}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "error_cb": self._error,
            }
        )
        self.consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self.fatal: list[str] = []
        self._stop = threading.Event()
        self._worker = Worker(f"kafka-tail-{topic}", self._run)

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))
        else:
            self.errors[error.name()] += 1

    def start(self) -> KafkaTailReader:
        self._worker.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and not self.fatal:
            for msg in self.consumer.consume(200, 0.2):
                if msg.error() is not None:
                    if msg.error().fatal():
                        raise KafkaException(msg.error())
                    self.errors[msg.error().name()] += 1
                    continue
                self.history.read(msg.partition(), msg.offset(), msg.value().decode())
                self.reads += 1

    def stop(self) -> None:
        self._stop.set()
        # join raises while the thread still polls; the client is then left open, as closing
        # a consumer another thread polls aborts the whole process inside librdkafka
        self._worker.join(15)
        self.consumer.close()
        if self.fatal:
            raise AssertionError(f"librdkafka's consumer failed: {self.fatal}")


def committed_offsets(config: dict, group_id: str, topic: str, partitions: int) -> dict[int, int]:
    """partition -> the group's committed offset (OffsetFetch from a consumer that does not
    join the group); -1001 where nothing is committed."""
    consumer = Consumer({**config, "group.id": group_id, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        found = consumer.committed(wanted, timeout=CLIENT_TIMEOUT_S)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def group_coordinator(admin: AdminClient, group_id: str) -> int:
    """The broker id coordinating ``group_id``, as DescribeGroups names it.

    Use one ``AdminClient`` for a whole scenario: librdkafka 2.16's ``rd_kafka_destroy``
    of an admin client whose request timed out against a killed broker was seen to block
    for good (a scenario hung in ``Admin_dealloc`` while the coordinator was down)."""
    futures = admin.describe_consumer_groups([group_id], request_timeout=CLIENT_TIMEOUT_S)
    return futures[group_id].result(CLIENT_TIMEOUT_S).coordinator.id


class KafkaGroupReader:
    """A group member (librdkafka; the classic or the consumer protocol) reading the topic
    and committing, synchronously, the offset after the last record it processed. It records
    what it read (``history.read``: reads that were later replaced are divergent), which
    offsets of each partition it processed, every commit the coordinator acknowledged, and,
    at every ``committed()`` lookup, any committed offset above what it processed (ahead) or
    below one acknowledged earlier (moved back)."""

    def __init__(
        self, history: History, config: dict, topic: str, group_id: str, protocol: str
    ) -> None:
        self.history = history
        self.topic = topic
        self.group_id = group_id
        self.retried: Counter[str] = Counter()
        # the consumer protocol (KIP-848) takes its session and heartbeat from the broker
        timing = (
            {"session.timeout.ms": 6_000, "heartbeat.interval.ms": 500}
            if protocol == "classic"
            else {}
        )
        self.consumer = Consumer(
            {
                **config,
                "group.id": group_id,
                "group.protocol": protocol,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **timing,
                "error_cb": self._error,
            }
        )
        self.processed: dict[int, int] = {}  # partition -> 1 + highest offset processed
        self.offsets_read: dict[int, set[int]] = defaultdict(set)
        self.acked: dict[int, int] = {}  # partition -> highest acknowledged commit
        self.ahead: list[tuple[int, int, int]] = []  # (partition, committed, processed)
        self.moved_back: list[tuple[int, int, int]] = []  # (partition, committed, floor)
        self.commits = 0
        self.lookups = 0
        self.reprocessed = 0  # records processed again (after a rebalance: at least once)
        self.fatal: list[str] = []
        self.running = True
        self._stop = threading.Event()
        self._worker = Worker(f"kafka-group-{topic}", self._run)

    def _error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))
        else:
            self.retried[error.name()] += 1

    def start(self) -> KafkaGroupReader:
        self.consumer.subscribe([self.topic])
        self._worker.start()
        return self

    def _run(self) -> None:
        last_lookup = time.monotonic()
        try:
            while not self._stop.is_set() and not self.fatal:
                self._round()
                if time.monotonic() - last_lookup > 1.0:
                    self.check_committed()
                    last_lookup = time.monotonic()
        finally:
            self.running = False

    def _round(self) -> None:
        touched = set()
        for msg in self.consumer.consume(200, 0.5):
            if msg.error() is not None:
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                self.retried[msg.error().name()] += 1
                continue
            p, offset = msg.partition(), msg.offset()
            self.history.read(p, offset, msg.value().decode())
            if offset in self.offsets_read[p]:
                self.reprocessed += 1
            self.offsets_read[p].add(offset)
            self.processed[p] = max(self.processed.get(p, 0), offset + 1)
            touched.add(p)
        if not touched:
            return
        offsets = [TopicPartition(self.topic, p, self.processed[p]) for p in sorted(touched)]
        try:
            answer = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:  # NOT_COORDINATOR, fenced by a rebalance, ...: retried
            self.retried[f"commit {e.args[0].name()}"] += 1
            return
        self.commits += 1
        for tp in answer or ():
            if tp.error is None:
                self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), tp.offset)
            else:
                self.retried[f"commit {tp.error.name()}"] += 1

    def check_committed(self) -> None:
        """Looks up the group's committed offsets; a failed lookup (coordinator moving) is
        retried later, and counted."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        try:
            committed = self.consumer.committed(assignment, timeout=CLIENT_TIMEOUT_S)
        except KafkaException as e:
            self.retried[f"committed {e.args[0].name()}"] += 1
            return
        self.lookups += 1
        for tp in committed:
            if tp.error is not None or tp.offset < 0:
                continue
            if tp.offset > self.processed.get(tp.partition, 0):
                self.ahead.append((tp.partition, tp.offset, self.processed.get(tp.partition, 0)))
            if tp.offset < self.acked.get(tp.partition, -1):
                self.moved_back.append((tp.partition, tp.offset, self.acked[tp.partition]))

    def wait_processed(self, ends: dict[int, int], timeout: float = 60.0) -> None:
        """Until the member has processed every partition up to ``ends`` (while running)."""
        deadline = time.monotonic() + timeout
        while any(self.processed.get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline or not self.running:
                raise AssertionError(
                    f"group member processed {self.processed}, not up to {ends}, in {timeout} s"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stops the member after one last lookup of its committed offsets."""
        self._stop.set()
        self._worker.join(20)  # raises while the thread still polls (see KafkaTailReader.stop)
        try:
            self.check_committed()
        finally:
            self.consumer.close()
        if self.fatal:
            raise AssertionError(f"librdkafka's group consumer failed: {self.fatal}")
