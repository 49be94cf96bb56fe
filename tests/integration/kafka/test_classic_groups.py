"""The classic consumer-group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, client-side
assignors) with clients we did not write, on a real broker: librdkafka (confluent-kafka) with
the range, roundrobin and cooperative-sticky assignors, two and three members sharing a topic
(every partition owned by exactly one member), one leaving and the rest taking over, commits
and a restarted consumer resuming from them; kafka-python's KafkaConsumer in a group; Kafka's
admin client and REST describing the group; a KIP-848 member refused on a classic group."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.broker import DEFAULT_TOPICS
from tests.integration.groups.conftest import http_json
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

WIDE = 6
GROUP_TOPICS = {
    **DEFAULT_TOPICS,
    "wide": (WIDE, {}),
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
}
TIMEOUT_S = 60


@pytest.fixture
def gbroker(kafka_launcher):
    """One broker with a Kafka listener, a six-partition topic and ``__consumer_offsets``."""
    return kafka_launcher(GROUP_TOPICS, kafka=True)


def produce(b, count: int, start: int = 0, topic: str = "wide", partitions: int = WIDE) -> None:
    producer = Producer(confluent_config(b.bootstrap, acks="all"))
    failures = []
    for i in range(start, start + count):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            partition=i % partitions,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
    assert producer.flush(TIMEOUT_S) == 0 and failures == []


def member(b, group: str, strategy: str = "range", **extra) -> Consumer:
    c = Consumer(
        confluent_config(
            b.bootstrap,
            **{
                "group.id": group,
                "partition.assignment.strategy": strategy,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                **extra,
            },
        )
    )
    c.subscribe(["wide"])
    return c


def poll_until(consumers: list[Consumer], done: Callable[[], bool], sink=None) -> None:
    """Poll every consumer in turn until ``done()`` (bounded)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None and sink is not None:
                sink.append((c, m))
        if done():
            return
    raise AssertionError("timed out waiting for the group")


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def partitioned(consumers: list[Consumer]) -> Callable[[], bool]:
    """Every partition of ``wide`` owned by exactly one of ``consumers``, each holding some."""

    def check() -> bool:
        sets = [owned(c) for c in consumers]
        union = set().union(*sets)
        return union == set(range(WIDE)) and sum(len(s) for s in sets) == WIDE and all(sets)

    return check


def rest(b, method: str, path: str, body=None):
    return http_json(method, f"{b.url}/sluice/v1/groups{path}", body, key=b.api_key)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_members_share_partitions_rebalance_on_join_and_leave(gbroker, strategy):
    group = f"classic-{strategy}"
    a, b = member(gbroker, group, strategy), member(gbroker, group, strategy)
    consumers = [a, b]
    try:
        poll_until(consumers, partitioned(consumers))
        produce(gbroker, 60)
        seen: list = []
        poll_until(consumers, lambda: len(seen) >= 60, seen)
        values = sorted(m.value() for _, m in seen)
        assert values == sorted(f"v{i}".encode() for i in range(60))  # each record once
        for c, m in seen:  # from the partitions its consumer owns
            assert m.partition() in owned(c)
        # a third member: the six partitions are split three ways
        c3 = member(gbroker, group, strategy)
        consumers.append(c3)
        poll_until(consumers, partitioned(consumers))
        assert sorted(len(owned(c)) for c in consumers) == [2, 2, 2]
        # one leaves: the other two take its partitions over
        consumers.remove(a)
        a.close()
        poll_until(consumers, partitioned(consumers))
        assert sorted(len(owned(c)) for c in consumers) == [3, 3]
        status, desc = rest(gbroker, "GET", f"/{group}")
        assert status == 200, desc
        assert desc["type"] == "classic" and desc["state"] == "STABLE"
        assigned = sorted(tp["partition"] for m in desc["members"] for tp in m["assignments"])
        assert assigned == list(range(WIDE))
    finally:
        for c in consumers:
            c.close()


def test_commits_and_a_restarted_consumer_resumes_from_them(gbroker):
    group = "classic-resume"
    produce(gbroker, 30)
    c = member(gbroker, group)
    try:
        seen: list = []
        poll_until([c], lambda: len(seen) >= 30, seen)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("wide", p) for p in range(WIDE)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [5] * WIDE
    finally:
        c.close()
    # the group's offsets are REST's too
    status, offsets = rest(gbroker, "GET", f"/{group}/offsets")
    assert status == 200 and sorted(o["offset"] for o in offsets["offsets"]) == [5] * WIDE
    produce(gbroker, 12, start=30)
    again = member(gbroker, group)
    try:
        seen = []
        poll_until([again], lambda: len(seen) >= 12, seen)
        time.sleep(0.5)
        while (m := again.poll(0.2)) is not None:
            seen.append((again, m))
        assert sorted(m.value() for _, m in seen) == sorted(f"v{i}".encode() for i in range(30, 42))
    finally:
        again.close()


def test_admin_client_describes_the_classic_group(gbroker):
    group = "classic-described"
    a = member(gbroker, group, **{"client.id": "alpha"})
    b = member(gbroker, group, **{"client.id": "beta"})
    try:
        poll_until([a, b], partitioned([a, b]))
        admin = AdminClient(confluent_config(gbroker.bootstrap))
        desc = admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT_S)
        assert desc.state.name == "STABLE" and desc.partition_assignor == "range"
        assert sorted(m.client_id for m in desc.members) == ["alpha", "beta"]
        by_client = {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in desc.members
        }
        assert by_client["alpha"] | by_client["beta"] == set(range(WIDE))
        assert by_client == {"alpha": owned(a), "beta": owned(b)} or by_client == {
            "alpha": owned(b),
            "beta": owned(a),
        }
        assert all(m.host == "/127.0.0.1" for m in desc.members)
        listed = admin.list_consumer_groups().result(timeout=TIMEOUT_S)
        assert group in {g.group_id for g in listed.valid}
    finally:
        a.close()
        b.close()


def test_kafka_python_consumer_in_a_group(gbroker):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    group = "classic-kafka-python"
    produce(gbroker, 18)
    consumer = KafkaConsumer(
        "wide",
        **kafka_python_config(
            gbroker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=2000,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        ),
    )
    try:
        values = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 18 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(18))
        assert consumer.assignment() == {KTP("wide", p) for p in range(WIDE)}
        consumer.commit()
        assert [consumer.committed(KTP("wide", p)) for p in range(WIDE)] == [3] * WIDE
    finally:
        consumer.close()
    # librdkafka sees the same committed offsets
    c = Consumer(confluent_config(gbroker.bootstrap, **{"group.id": group}))
    try:
        got = c.committed([TopicPartition("wide", p) for p in range(WIDE)], timeout=10)
        assert [tp.offset for tp in got] == [3] * WIDE
    finally:
        c.close()


def test_a_kip848_member_cannot_join_a_classic_group(gbroker):
    group = "classic-only"
    c = member(gbroker, group)
    try:
        poll_until([c], lambda: owned(c) == set(range(WIDE)))
        status, body = rest(
            gbroker, "POST", f"/{group}/heartbeat", {"member_epoch": 0, "subscriptions": ["wide"]}
        )
        assert status >= 400 and body["error_code"] == "INCONSISTENT_GROUP_PROTOCOL"
    finally:
        c.close()


def test_a_standalone_commit_needs_an_empty_group(gbroker):
    """Manual assignment plus commit (generation -1, no member id): allowed while the group
    has no members, as Kafka allows; refused while it has."""
    group = "classic-standalone"
    produce(gbroker, 6)
    solo = Consumer(confluent_config(gbroker.bootstrap, **{"group.id": group}))
    try:
        solo.commit(offsets=[TopicPartition("wide", 0, 1)], asynchronous=False)
        got = solo.committed([TopicPartition("wide", 0)], timeout=10)
        assert got[0].offset == 1
        c = member(gbroker, group)
        try:
            poll_until([c], lambda: owned(c) == set(range(WIDE)))
            with pytest.raises(KafkaException) as e:
                solo.commit(offsets=[TopicPartition("wide", 0, 2)], asynchronous=False)
            assert "UNKNOWN_MEMBER_ID" in str(e.value)
        finally:
            c.close()
    finally:
        solo.close()


def rest_when_up(b, path: str) -> dict:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            status, body = rest(b, "GET", path)
        except OSError:
            status, body = 0, {}
        if status == 200:
            return body
        time.sleep(0.2)
    raise AssertionError(f"GET {path} did not answer 200 after the restart")


def test_generation_members_and_offsets_survive_a_coordinator_restart(gbroker):
    """kill -9 of the coordinator (RF 1: it comes back on restart): the new coordinator
    loads the group's generation, members and assignments from ``__consumer_offsets``, so
    the members carry on in the same generation, and the committed offsets are there."""
    group = "classic-failover"
    produce(gbroker, 12)
    patient = {"session.timeout.ms": 30000}
    a, b = member(gbroker, group, **patient), member(gbroker, group, **patient)
    consumers = [a, b]
    try:
        seen: list = []
        poll_until(consumers, lambda: partitioned(consumers)() and len(seen) >= 12, seen)
        for c in consumers:
            c.commit(asynchronous=False)
        before = rest_when_up(gbroker, f"/{group}")
        gbroker.restart(hard=True)
        after = rest_when_up(gbroker, f"/{group}")
        assert after["group_epoch"] == before["group_epoch"] and after["state"] == "STABLE"
        assert sorted(m["member_id"] for m in after["members"]) == sorted(
            m["member_id"] for m in before["members"]
        )
        assert sorted(o["committed_offset"] for o in after["offsets"]) == [2] * WIDE
        # the members go on consuming from where they were
        produce(gbroker, 12, start=12)
        more: list = []
        poll_until(consumers, lambda: len(more) >= 12, more)
        assert sorted(m.value() for _, m in more) == sorted(f"v{i}".encode() for i in range(12, 24))
    finally:
        for c in consumers:
            c.close()


def test_kcat_balanced_consumer_reads_and_commits(gbroker):
    """``kcat -G``: librdkafka's balanced consumer as a command; it reads every record,
    commits, and a second run of the same group reads nothing old."""
    import subprocess

    from tests.integration.kafka.conftest import kcat_args

    produce(gbroker, 12)
    base = [*kcat_args(gbroker.bootstrap), "-X", "auto.offset.reset=earliest", "-f", "%s\n"]
    out = subprocess.run(
        [*base, "-c", "12", "-G", "classic-kcat", "wide"],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert sorted(out.stdout.split()) == sorted(f"v{i}".encode() for i in range(12))
    status, offsets = rest(gbroker, "GET", "/classic-kcat/offsets")
    assert status == 200 and sum(o["offset"] for o in offsets["offsets"]) == 12
    produce(gbroker, 3, start=12)
    out = subprocess.run(
        [*base, "-c", "3", "-G", "classic-kcat", "wide"],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert sorted(out.stdout.split()) == [b"v12", b"v13", b"v14"]


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(gbroker):
    """``group.instance.id``: a static member that closes (librdkafka sends no LeaveGroup
    for one) and comes back inside its session timeout takes its old place: same
    partitions, same generation, the other member undisturbed."""
    group = "classic-static"
    static = {"session.timeout.ms": 30000}
    a = member(gbroker, group, **{"group.instance.id": "host-a", **static})
    b = member(gbroker, group, **{"group.instance.id": "host-b", **static})
    consumers = [a, b]
    try:
        poll_until(consumers, partitioned(consumers))
        held_a, held_b = owned(a), owned(b)
        before = rest_when_up(gbroker, f"/{group}")
        consumers.remove(a)
        a.close()
        a2 = member(gbroker, group, **{"group.instance.id": "host-a", **static})
        consumers.append(a2)
        poll_until(consumers, lambda: owned(a2) == held_a)
        after = rest_when_up(gbroker, f"/{group}")
        assert after["group_epoch"] == before["group_epoch"]
        assert owned(b) == held_b
        assert {m["instance_id"] for m in after["members"]} == {"host-a", "host-b"}
    finally:
        for c in consumers:
            c.close()


def test_librdkafka_and_kafka_python_members_share_one_group(gbroker):
    """Two different clients in one group: the coordinator picks the protocol both list
    (range), the leader's assignor splits the partitions, each owned once."""
    import threading

    from kafka import KafkaConsumer

    group = "classic-mixed"
    stop = threading.Event()
    python_owned: set[int] = set()
    failures: list[BaseException] = []

    def run_kafka_python() -> None:
        try:
            consumer = KafkaConsumer(
                "wide",
                **kafka_python_config(
                    gbroker.bootstrap,
                    group_id=group,
                    enable_auto_commit=False,
                    session_timeout_ms=6000,
                    heartbeat_interval_ms=300,
                ),
            )
            try:
                while not stop.is_set():
                    consumer.poll(timeout_ms=100)
                    python_owned.clear()
                    python_owned.update(tp.partition for tp in consumer.assignment())
            finally:
                consumer.close()
        except BaseException as e:  # reported by the test thread
            failures.append(e)

    thread = threading.Thread(target=run_kafka_python, daemon=True)
    thread.start()
    c = member(gbroker, group, "range,roundrobin")
    try:

        def split() -> bool:
            mine, theirs = owned(c), set(python_owned)
            return (
                bool(mine)
                and bool(theirs)
                and mine | theirs == set(range(WIDE))
                and (not mine & theirs)
            )

        poll_until([c], split)
        status, desc = rest(gbroker, "GET", f"/{group}")
        assert status == 200 and desc["assignor"] == "range" and len(desc["members"]) == 2
    finally:
        c.close()
        stop.set()
        thread.join(TIMEOUT_S)
    assert not failures and not thread.is_alive()
