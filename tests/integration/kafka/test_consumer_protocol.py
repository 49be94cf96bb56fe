"""The KIP-848 consumer protocol with librdkafka (confluent-kafka, ``group.protocol=consumer``)
on a real broker: two members share the partitions and consume each record once, one leaves
and the other takes over, commits, and a restart resumes from the committed offsets; the
group and its offsets are the ones REST shows, and the describe of Kafka's admin client
matches what the members hold. Errors: an unknown server assignor is Kafka's
UNSUPPORTED_ASSIGNOR."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from brokernodes.client import GroupConsumer
from harness.broker import DEFAULT_TOPICS
from tests.integration.groups.conftest import http_json
from tests.integration.kafka.conftest import confluent_config

GROUP_TOPICS = {**DEFAULT_TOPICS, "__consumer_offsets": (4, {"cleanup.policy": "compact"})}
TIMEOUT_S = 60
ORDERS = 3


@pytest.fixture
def gbroker(kafka_launcher):
    """One broker with a Kafka listener and ``__consumer_offsets``."""
    return kafka_launcher(GROUP_TOPICS, kafka=True)


def rest(b, method: str, path: str, body=None):
    return http_json(method, f"{b.url}/sluice/v1/groups{path}", body, key=b.api_key)


def produce(b, count: int, start: int = 0) -> None:
    """``count`` records spread over the orders partitions, acknowledged."""
    producer = Producer(confluent_config(b.bootstrap, acks="all"))
    failures = []
    for i in range(start, start + count):
        producer.produce(
            "orders",
            value=f"v{i}".encode(),
            partition=i % ORDERS,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
    assert producer.flush(TIMEOUT_S) == 0 and failures == []


def member(b, group: str, **extra) -> Consumer:
    c = Consumer(
        confluent_config(
            b.bootstrap,
            **{
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **extra,
            },
        )
    )
    c.subscribe(["orders"])
    return c


class Seen:
    """Records consumed, by (partition, offset), and errors the consumers reported."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], bytes] = {}
        self.by_member: dict[int, list[tuple[int, int]]] = {}
        self.errors: list[KafkaError] = []

    def poll(self, consumers: list[Consumer], until: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                m = c.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(m.error())
                    fatal = m.error().fatal() or m.error().code() == KafkaError._FATAL
                    assert not fatal, m.error()
                    continue
                key = (m.partition(), m.offset())
                assert key not in self.records, f"{key} consumed twice"
                self.records[key] = m.value()
                self.by_member.setdefault(i, []).append(key)
            if until():
                return
        raise AssertionError(f"timed out after {TIMEOUT_S} s waiting for {what}")


def held(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def committed(c: Consumer) -> dict[int, int]:
    tps = [TopicPartition("orders", p) for p in range(ORDERS)]
    return {tp.partition: tp.offset for tp in c.committed(tps, timeout=TIMEOUT_S)}


def test_two_members_share_take_over_commit_and_resume(gbroker):
    """Members commit what they consumed before partitions move, so every record is
    consumed exactly once across the rebalances."""
    b = gbroker
    produce(b, 30)
    seen = Seen()
    a = member(b, "shop")
    seen.poll([a], lambda: len(seen.records) == 30, "the first member to read all 30")
    assert held(a) == {0, 1, 2}
    a.commit(asynchronous=False)
    bm = member(b, "shop")
    try:
        seen.poll(
            [a, bm],
            lambda: held(a) and held(bm) and held(a) | held(bm) == {0, 1, 2},
            "the partitions to be shared",
        )
        assert not held(a) & held(bm)
        # the coordinator's view, over REST, matches what the members hold
        status, group = rest(b, "GET", "/shop")
        assert status == 200 and group["type"] == "consumer"
        assert group["state"] == "STABLE" and len(group["members"]) == 2
        rest_held = sorted(
            sorted(tp["partition"] for tp in m["assignments"]) for m in group["members"]
        )
        assert rest_held == sorted([sorted(held(a)), sorted(held(bm))])
        assert {m["client_id"] for m in group["members"]} == {"rdkafka"}
        produce(b, 6, start=30)
        seen.poll([a, bm], lambda: len(seen.records) == 36, "the records produced after")
        # each member read the new records of the partitions it holds, and only those
        for i, c in enumerate([a, bm]):
            new = {p for p, o in seen.by_member[i] if o >= 10}
            assert new == held(c)
        bm.commit(asynchronous=False)
    finally:
        bm.close()  # leaves the group: its partitions go to the other member
    seen.poll([a], lambda: held(a) == {0, 1, 2}, "the remaining member to take over")
    produce(b, 6, start=36)
    seen.poll([a], lambda: len(seen.records) == 42, "the records produced after the leave")
    a.commit(asynchronous=False)
    assert committed(a) == {0: 14, 1: 14, 2: 14}
    a.close()

    status, offsets = rest(b, "GET", "/shop/offsets")
    assert status == 200
    assert {o["partition"]: o["offset"] for o in offsets["offsets"]} == {0: 14, 1: 14, 2: 14}

    # a new member resumes from the committed offsets: only the new records arrive
    produce(b, 3, start=42)
    again = Seen()
    c = member(b, "shop")
    try:
        again.poll([c], lambda: len(again.records) == 3, "the three new records")
        assert sorted(again.records) == [(0, 14), (1, 14), (2, 14)]
    finally:
        c.close()


def test_kafka_admin_describes_a_consumer_protocol_group(gbroker):
    b = gbroker
    produce(b, 3)
    seen = Seen()
    a = member(b, "described", **{"group.remote.assignor": "range", "client.id": "app-1"})
    try:
        seen.poll([a], lambda: held(a) == {0, 1, 2}, "the member to get every partition")
        admin = AdminClient(confluent_config(b.bootstrap))
        futures = admin.describe_consumer_groups(["described"], request_timeout=TIMEOUT_S)
        group = futures["described"].result(timeout=TIMEOUT_S)
        assert group.type == ConsumerGroupType.CONSUMER
        assert group.partition_assignor == "range"
        (m,) = group.members
        assert m.client_id == "app-1" and m.host == "/127.0.0.1"
        assert {tp.partition for tp in m.assignment.topic_partitions} == {0, 1, 2}
        assert {tp.topic for tp in m.assignment.topic_partitions} == {"orders"}
        assert {tp.partition for tp in m.target_assignment.topic_partitions} == {0, 1, 2}
        status, body = rest(b, "GET", "/described")
        assert status == 200 and body["assignor"] == "range"
    finally:
        a.close()


def test_an_unknown_server_assignor_is_refused(gbroker):
    b = gbroker
    c = member(b, "picky", **{"group.remote.assignor": "magic"})
    try:
        deadline = time.monotonic() + TIMEOUT_S
        error = None
        while error is None and time.monotonic() < deadline:
            try:
                m = c.poll(0.2)
            except KafkaException as e:
                error = e.args[0]
                break
            if m is not None and m.error():
                error = m.error()
        assert error is not None, "no error for an unknown assignor"
        # librdkafka raises UNSUPPORTED_ASSIGNOR as a fatal error (its text is Kafka's)
        assert error.code() == KafkaError._FATAL
        assert "assignor or its version range is not supported" in error.str()
    finally:
        c.close()
    status, _ = rest(b, "GET", "/picky")
    assert status == 404  # no group was made


def test_a_librdkafka_member_and_an_sdk_member_share_one_group(gbroker):
    """One group, two fronts: a Kafka-protocol member and a Sluice SDK member (HTTP) split
    the partitions between them and each reads the new records of its own."""
    b = gbroker
    produce(b, 30)
    seen = Seen()
    kafka_member = member(b, "mixed")
    seen.poll([kafka_member], lambda: len(seen.records) == 30, "the Kafka member to read all")
    kafka_member.commit(asynchronous=False)
    sdk = GroupConsumer(
        b.url,
        b.api_key,
        group_id="mixed",
        topics=["orders"],
        client_id="sdk",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    sdk_seen: dict[tuple[int, int], bytes] = {}
    try:

        def poll_sdk() -> None:
            for r in sdk.poll(0.1):
                key = (r.partition, r.offset)
                assert key not in sdk_seen and key not in seen.records, f"{key} twice"
                sdk_seen[key] = r.value

        def shared() -> bool:
            poll_sdk()
            mine, theirs = held(kafka_member), {tp.partition for tp in sdk.assignment()}
            return bool(mine and theirs and mine | theirs == {0, 1, 2} and not mine & theirs)

        seen.poll([kafka_member], shared, "the two members to share the partitions")
        status, group = rest(b, "GET", "/mixed")
        assert status == 200
        assert sorted(m["client_id"] for m in group["members"]) == ["rdkafka", "sdk"]
        produce(b, 6, start=30)
        seen.poll(
            [kafka_member],
            lambda: poll_sdk() or len(seen.records) + len(sdk_seen) == 36,
            "the six new records",
        )
        assert {p for p, _ in sdk_seen} == {tp.partition for tp in sdk.assignment()}
        assert {p for p, o in seen.records if o >= 10} == held(kafka_member)
    finally:
        sdk.close()
        kafka_member.close()


def test_a_static_member_restarts_without_a_rebalance(gbroker):
    """``group.instance.id``: closing leaves temporarily (epoch -2); the next incarnation
    gets the same partitions back at the same group epoch."""
    b = gbroker
    produce(b, 3)
    seen = Seen()
    first = member(b, "static", **{"group.instance.id": "host-a"})
    seen.poll([first], lambda: len(seen.records) == 3, "the first incarnation to read")
    first.commit(asynchronous=False)
    status, before = rest(b, "GET", "/static")
    assert status == 200 and len(before["members"]) == 1
    first.close()
    status, away = rest(b, "GET", "/static")
    assert away["group_epoch"] == before["group_epoch"] and len(away["members"]) == 1

    again = Seen()
    second = member(b, "static", **{"group.instance.id": "host-a"})
    try:
        again.poll([second], lambda: held(second) == {0, 1, 2}, "the partitions to come back")
        status, after = rest(b, "GET", "/static")
        assert after["group_epoch"] == before["group_epoch"]  # no rebalance
        assert [m["instance_id"] for m in after["members"]] == ["host-a"]
        produce(b, 3, start=3)
        again.poll([second], lambda: len(again.records) == 3, "the new records")
        assert sorted(again.records) == [(0, 1), (1, 1), (2, 1)]
    finally:
        second.close()
