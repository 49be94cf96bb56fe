"""Kafka protocol and WebSocket streams share the partition logs: records a Kafka producer
writes reach a WebSocket consumer on the live tail, and records a WebSocket producer writes
are read by Kafka consumers, keys and headers intact."""

from __future__ import annotations

import asyncio
import base64
import json
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from tests.integration.broker.test_ws import connect, recv_json, recv_until_quiet, run
from tests.integration.kafka.conftest import confluent_config, kafka_python_config


def test_kafka_producer_to_websocket_consumer(kafka_broker):
    async def go():
        path = "/sluice/v1/ws/consume?topic=events&partition=0&from=latest&format=text"
        async with connect(kafka_broker, path) as ws:
            await ws.send_str(json.dumps({"credit": 1 << 20}))
            assert await recv_until_quiet(ws, 0.3) == []

            def produce():
                producer = Producer(confluent_config(kafka_broker.bootstrap, acks="all"))
                for i in range(3):
                    producer.produce(
                        "events", b"ws-%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)]
                    )
                assert producer.flush(20) == 0

            await asyncio.to_thread(produce)
            got = []
            while len(got) < 3:
                got += (await recv_json(ws))["records"]
            return got

    got = run(go())
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (i, f"k{i}", f"ws-{i}") for i in range(3)
    ]
    assert got[1]["headers"] == [{"name": "h", "value": base64.b64encode(b"1").decode()}]


def test_websocket_producer_to_kafka_consumer(kafka_broker):
    async def go():
        async with connect(kafka_broker, "/sluice/v1/ws/produce") as ws:
            records = [
                {
                    "key": {"type": "STRING", "data": f"wk{i}"},
                    "value": {"type": "STRING", "data": f"from-ws-{i}"},
                    "headers": [{"name": "src", "value": base64.b64encode(b"ws").decode()}],
                    "partition_id": 1,
                }
                for i in range(4)
            ]
            await ws.send_str(json.dumps({"id": 1, "topic": "orders", "records": records}))
            return await recv_json(ws)

    ack = run(go())
    assert [o["offset"] for o in ack["offsets"]] == [0, 1, 2, 3], ack
    consumer = KafkaConsumer(**kafka_python_config(kafka_broker.bootstrap))
    try:
        tp = KTP("orders", 1)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 4 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
    finally:
        consumer.close()
    assert [(m.offset, m.key, m.value, m.headers) for m in got] == [
        (i, b"wk%d" % i, b"from-ws-%d" % i, [("src", b"ws")]) for i in range(4)
    ]
