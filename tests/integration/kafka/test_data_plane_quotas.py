"""Quotas on the Kafka listener of a control-plane broker: a tenant producing and fetching
over its byte-rate quotas gets ``throttle_time_ms`` in the answers (KIP-219: the broker
mutes the connection for that long, the handler does not sleep), and its storage quota
refuses produce with a per-partition error while nothing is appended."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.control_plane import StaffSession
from tests.integration.kafka.cp_kafka import kafka_control_plane, new_tenant, sasl
from tests.integration.kafka.data_plane_wire import KafkaWire

T = 20
QUOTA = 50_000  # bytes/s


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-quotas"), brokers=1) as cp:
        yield cp


@pytest.fixture(scope="module")
def staff(cp) -> StaffSession:
    return StaffSession(cp)


def create(cp, tenant, *names) -> None:
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    for future in admin.create_topics(
        [NewTopic(n, 1, 1) for n in names], request_timeout=T
    ).values():
        future.result(T)


def produce(wire: KafkaWire, topic: str, value: bytes) -> tuple[dict, int]:
    records = encode_batch([Record(int(time.time() * 1000), None, value)])
    answer = wire.request(
        apis.PRODUCE,
        9,
        {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return answer["responses"][0]["partition_responses"][0], answer["throttle_time_ms"]


def wire_for(cp, tenant) -> KafkaWire:
    user, secret = sasl(tenant.key)
    return KafkaWire(cp.kafka_bootstrap, user, secret)


def eventually_created(wire: KafkaWire, topic: str) -> None:
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        p, _ = produce(wire, topic, b"warm-up")
        if p["error_code"] == kerr.NONE:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} never became writable")


def test_byte_rate_quotas_answer_throttle_time(cp, staff):
    tenant = new_tenant(cp, "throttled")
    create(cp, tenant, "fast")
    staff.set_quota("throttled", produce_bytes_per_sec=QUOTA, fetch_bytes_per_sec=QUOTA)
    time.sleep(1.0)  # the broker's metadata long poll delivers the quota
    with wire_for(cp, tenant) as wire:
        eventually_created(wire, "fast")
        throttles = []
        started = time.monotonic()
        for _ in range(20):  # 1 MB at once: twice the rate over the quota window (10 s)
            p, throttle = produce(wire, "fast", b"x" * 50_000)
            assert p["error_code"] == kerr.NONE
            throttles.append(throttle)
        elapsed = time.monotonic() - started
        assert max(throttles) > 0, throttles
        # the connection was muted after each throttled answer: the client was held back
        assert elapsed >= sum(throttles[:-1]) / 1000 * 0.8, (elapsed, throttles)
        answer = wire.request(
            apis.FETCH,
            11,
            {
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 24,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic": "fast",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}
                        ],
                    }
                ],
            },
        )
        assert answer["responses"][0]["partitions"][0]["error_code"] == kerr.NONE
        assert answer["throttle_time_ms"] > 0
        # acks=0 has no answer to carry the throttle: the connection is muted all the same
        time.sleep(answer["throttle_time_ms"] / 1000)  # the fetch's own mute
        records = encode_batch([Record(int(time.time() * 1000), None, b"z" * 200_000)])
        for _ in range(2):  # 400 kB more: seconds over the quota whatever came before
            wire.send(
                apis.PRODUCE,
                9,
                {
                    "acks": 0,
                    "timeout_ms": 5000,
                    "topic_data": [
                        {"name": "fast", "partition_data": [{"index": 0, "records": records}]}
                    ],
                },
            )
        started = time.monotonic()
        wire.request(apis.METADATA, 12, {"topics": []})
        assert 0.5 < time.monotonic() - started < 20  # read only after the mute


def test_storage_quota_refuses_produce(cp, staff):
    tenant = new_tenant(cp, "stored")
    create(cp, tenant, "full")
    with wire_for(cp, tenant) as wire:
        eventually_created(wire, "full")
        staff.set_quota("stored", storage_bytes=10_000)
        deadline = time.monotonic() + T
        code = kerr.NONE
        while code == kerr.NONE and time.monotonic() < deadline:
            p, _ = produce(wire, "full", b"s" * 2_000)
            code = p["error_code"]
        assert code == kerr.THROTTLING_QUOTA_EXCEEDED
        assert "storage quota exceeded" in p["error_message"]
