"""An idempotent Kafka producer keeps producing while its broker is killed and restarted:
every acknowledged record is in the log exactly once and in order (the producer state is
rebuilt from the log, so the client's retries are deduplicated)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from brokernodes.records.batch import decode_batches
from tests.integration.broker.util import fetch_binary
from tests.integration.kafka.conftest import confluent_config

N = 3000


def read_values(broker, topic: str) -> list[bytes]:
    out: list = []
    offset = 0
    for _ in range(1000):
        status, _, body = fetch_binary(broker, topic, 0, offset)
        assert status == 200, body
        if not body:
            return [r.value for r in out]
        for b in decode_batches(body):
            out.extend(r for r in b.records if r.offset >= offset)
        offset = out[-1].offset + 1
    raise AssertionError("the partition did not end")


def test_idempotent_producer_survives_a_broker_crash(kafka_launcher):
    broker = kafka_launcher(kafka=True, topics={"crash": (1, {})})
    producer = Producer(
        confluent_config(
            broker.bootstrap,
            acks="all",
            **{
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.max.ms": 200,
            },
        )
    )
    reports: list = []
    started = threading.Event()

    def send() -> None:
        for i in range(N):
            while True:
                try:
                    producer.produce(
                        "crash", b"%06d" % i, on_delivery=lambda e, m: reports.append(e)
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if i == N // 3:
                started.set()
            if i % 50 == 0:
                producer.poll(0)
                time.sleep(0.005)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    assert started.wait(30)
    broker.restart(hard=True)  # SIGKILL mid-stream, then start again on the same ports
    sender.join(60)
    assert not sender.is_alive()
    assert producer.flush(60) == 0
    assert len(reports) == N
    assert all(e is None for e in reports), [e for e in reports if e is not None][:3]
    values = read_values(broker, "crash")
    assert values == [b"%06d" % i for i in range(N)]  # each once, in order
