"""Pipelined Produce requests on one Kafka connection (librdkafka keeps up to max.in.flight
of them): a real broker, a topic that fsyncs every record (flush.messages=1, so the waits
after the appends overlap), requests written back to back before any answer is read.
Answers come back in request order, an idempotent producer's batches are appended in the
order sent (no OUT_OF_ORDER_SEQUENCE_NUMBER, offsets in sequence order, read back in
order), and a request that is not pipelined (Metadata) or answers an error waits its turn
in the middle of a pipeline."""

from __future__ import annotations

import struct
import time

import pytest

from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.header import iter_batches
from brokernodes.server.protocol.kafka import apis
from tests.integration.kafka.data_plane_wire import KafkaWire

TOPIC = "pipe-durable"
PRODUCE_V = 9  # flexible
N = 40


@pytest.fixture
def broker(kafka_launcher):
    return kafka_launcher({TOPIC: (2, {"flush.messages": "1"})}, kafka=True)


def _produce(batch: bytes, partition: int = 0, acks: int = -1) -> dict:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
    }


def _send_all(wire: KafkaWire, requests: list[tuple[int, int, dict]]) -> list[tuple[int, dict]]:
    """Write every request before reading any answer; (correlation id, body) per answer."""
    frames = []
    for api_key, version, body in requests:
        wire.correlation += 1
        flexible = apis.apis()[api_key].flexible(version)
        head = struct.pack(">hhih", api_key, version, wire.correlation, 4) + b"pipe"
        if flexible:
            head += b"\0"
        payload = b"".join(
            bytes(c) for c in apis.request_codec(api_key, version).encode_new(body).chunks()
        )
        frames.append(struct.pack(">i", len(head) + len(payload)) + head + payload)
    wire.sock.sendall(b"".join(frames))
    answers = []
    for api_key, version, _ in requests:
        (size,) = struct.unpack(">i", wire._exactly(4))
        frame = wire._exactly(size)
        (correlation,) = struct.unpack_from(">i", frame, 0)
        flexible = apis.apis()[api_key].flexible(version) and api_key != apis.API_VERSIONS
        codec = apis.response_codec(api_key, version)
        answers.append((correlation, codec.decode_all(frame[5:] if flexible else frame[4:])))
    return answers


def _partition_answer(body: dict) -> dict:
    return body["responses"][0]["partition_responses"][0]


def test_an_idempotent_producers_pipelined_batches_append_and_answer_in_order(broker):
    with KafkaWire(broker.bootstrap) as wire:
        init = wire.request(apis.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                            "transaction_timeout_ms": -1, "producer_id": -1,
                            "producer_epoch": -1})  # fmt: skip
        assert init["error_code"] == 0
        pid, epoch = init["producer_id"], init["producer_epoch"]
        now = int(time.time() * 1000)
        requests = [
            (apis.PRODUCE, PRODUCE_V, _produce(encode_batch(
                [Record(now, None, f"r{i}".encode())], producer_id=pid, producer_epoch=epoch,
                base_sequence=i)))
            for i in range(N)
        ]  # fmt: skip
        first = wire.correlation + 1
        answers = _send_all(wire, requests)
    assert [c for c, _ in answers] == list(range(first, first + N))
    parts = [_partition_answer(a) for _, a in answers]
    assert [p["error_code"] for p in parts] == [0] * N
    offsets = [p["base_offset"] for p in parts]
    assert offsets == sorted(offsets) and len(set(offsets)) == N

    with KafkaWire(broker.bootstrap) as wire:  # read back: the records in the order sent
        meta = wire.request(apis.METADATA, 12, {"topics": [{"name": TOPIC}],
                            "allow_auto_topic_creation": False})  # fmt: skip
        fetch = {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": meta["topics"][0]["topic_id"], "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        }  # fmt: skip
        records = wire.request(apis.FETCH, 13, fetch)["responses"][0]["partitions"][0]["records"]
    sequences = [h.base_sequence for h in iter_batches(bytearray(records))]
    assert sequences == list(range(N))


def test_a_metadata_request_and_an_error_wait_their_turn_in_a_pipeline(broker):
    now = int(time.time() * 1000)
    batch = encode_batch([Record(now, None, b"v")])
    metadata = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
    requests = (
        [(apis.PRODUCE, PRODUCE_V, _produce(batch, acks=1)) for _ in range(5)]
        + [(apis.METADATA, 12, metadata)]
        + [(apis.PRODUCE, PRODUCE_V, _produce(batch, partition=p % 2)) for p in range(6)]
        + [(apis.PRODUCE, PRODUCE_V, _produce(batch, partition=7))]  # no such partition
        + [(apis.PRODUCE, PRODUCE_V, _produce(batch, acks=1)) for _ in range(5)]
    )
    with KafkaWire(broker.bootstrap) as wire:
        first = wire.correlation + 1
        answers = _send_all(wire, requests)
        # the connection is still usable after the pipeline
        again = wire.request(apis.PRODUCE, PRODUCE_V, _produce(batch))
    assert [c for c, _ in answers] == list(range(first, first + len(requests)))
    assert answers[5][1]["topics"][0]["name"] == TOPIC
    produced = [_partition_answer(a) for i, (_, a) in enumerate(answers) if i != 5]
    codes = [p["error_code"] for p in produced]
    assert codes[11] != 0 and codes[:11] + codes[12:] == [0] * 16
    on_zero = [p["base_offset"] for i, p in enumerate(produced) if i != 11 and
               (i < 5 or i > 11 or (i - 5) % 2 == 0)]  # fmt: skip
    assert on_zero == list(range(len(on_zero)))  # partition 0: the order sent
    assert _partition_answer(again)["base_offset"] == len(on_zero)


def test_librdkafkas_pipelined_requests_append_each_record_once_in_order(broker):
    """librdkafka with 5 requests in flight and linger.ms 0 on an fsyncing topic, 10 KB
    records (1 MB batches): several of its requests reach the broker before the first is
    answered and run overlapped; the log holds each record once, in the order produced.
    (Its idempotent producer did not send a request before the one before was answered
    here, so it is the plain producer that exercises the overlap.)"""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.integration.kafka.conftest import confluent_config

    producer = Producer(confluent_config(broker.bootstrap, **{
        "enable.idempotence": False, "acks": "all", "linger.ms": 0,
        "max.in.flight.requests.per.connection": 5}))  # fmt: skip
    failed: list = []
    count = 2000
    pad = b"p" * 10_000  # 20 MB: librdkafka's 1 MB batches, several in flight at once
    for i in range(count):
        producer.produce(TOPIC, value=b"%d " % i + pad, partition=0,
                         on_delivery=lambda err, _m: err and failed.append(err))  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []
    consumer = Consumer(confluent_config(broker.bootstrap, **{
        "group.id": "pipe-readback", "enable.auto.commit": False}))  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for m in consumer.consume(500, 1.0):
            assert m.error() is None, m.error()
            values.append(int(m.value().split()[0]))
    consumer.close()
    assert values == list(range(count))


@pytest.fixture
def plain_broker(kafka_launcher):
    return kafka_launcher({"pipe-plain": (1, {})}, kafka=True)


def test_held_back_answers_of_a_burst_come_back_complete_and_in_order(plain_broker):
    """Without fsync every pipelined append completes at once, so answers are held back to
    leave together: each one still comes back, in order, before the answer of the Metadata
    request after them, and a lone produce after the bursts is answered at once."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(now, None, b"v")])

    def produce(acks: int) -> dict:
        part = {"index": 0, "records": batch}
        return {**_produce(batch, acks=acks), "topic_data": [
            {"name": "pipe-plain", "partition_data": [part]}]}  # fmt: skip

    metadata = {"topics": [{"name": "pipe-plain"}], "allow_auto_topic_creation": False}
    with KafkaWire(plain_broker.bootstrap) as wire:
        for burst in (2, 16, 100):
            requests = [(apis.PRODUCE, PRODUCE_V, produce(1)) for _ in range(burst)]
            first = wire.correlation + 1
            answers = _send_all(wire, [*requests, (apis.METADATA, 12, metadata)])
            assert [c for c, _ in answers] == list(range(first, first + burst + 1))
            parts = [_partition_answer(a) for _, a in answers[:-1]]
            assert [p["error_code"] for p in parts] == [0] * burst
            offsets = [p["base_offset"] for p in parts]
            assert offsets == list(range(offsets[0], offsets[0] + burst))
            assert answers[-1][1]["topics"][0]["name"] == "pipe-plain"
        again = wire.request(apis.PRODUCE, PRODUCE_V, produce(1))
    assert _partition_answer(again)["error_code"] == 0
