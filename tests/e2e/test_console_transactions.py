"""A topic's transactions in the console (issue 26): librdkafka's transactional producer,
against the stack's Kafka listener with Demo's API key, commits a transaction on partition 1
and leaves one open on partition 0; the script (transactions.e2e.mjs) finds the LSO held at
the open transaction's first offset beside the high watermark and the transaction listed
with its producer id, epoch, first offset and age. After the producer aborts it, a second
pass finds the LSO caught up and no transaction open."""

from __future__ import annotations

import json
import time
import urllib.request

from confluent_kafka import Producer

from tests.integration.kafka.cp_kafka import sasl

from .conftest import Stack, browse_script


def create_topic(stack: Stack, name: str) -> None:
    req = urllib.request.Request(
        f"{stack.url}/api/v1/topics/",
        data=json.dumps({"name": name, "partitions": 2}).encode(),
        headers={
            "Authorization": f"Bearer {stack.state['api_key']}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201


def test_open_transactions_and_the_lso(stack: Stack) -> None:
    topic = f"txn-console-{int(time.time()):x}"
    create_topic(stack, topic)
    user, secret = sasl(stack.state["api_key"])
    producer = Producer(
        {
            "bootstrap.servers": stack.state["kafka_bootstrap"],
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": secret,
            "transactional.id": f"{topic}-tx",
            # open for the whole browser pass: the coordinator must not abort it meanwhile
            "transaction.timeout.ms": 300_000,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, f"c{i}".encode(), partition=1)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"o{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    # librdkafka does not expose its producer id: the broker's metadata answer names it
    producer_id = open_producer_id(stack, topic)
    try:
        out = browse_script(
            stack,
            "transactions.e2e.mjs",
            TXN_TOPIC=topic,
            TXN_EXPECT="open",
            TXN_PRODUCER_ID=str(producer_id),
        )
        assert "ok   the open transaction is listed" in out
    finally:
        producer.abort_transaction(60)
    out = browse_script(stack, "transactions.e2e.mjs", TXN_TOPIC=topic, TXN_EXPECT="ended")
    assert "ok   no transaction is open once it is aborted" in out


def open_producer_id(stack: Stack, topic: str) -> int:
    """The producer id of partition 0's open transaction, from its leader's metadata."""
    deadline = time.monotonic() + 20
    while True:
        for url in stack.state["brokers"]:
            req = urllib.request.Request(
                f"{url}/sluice/v1/metadata",
                headers={"Authorization": f"Bearer {stack.state['api_key']}"},
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                doc = json.loads(r.read())
            for t in doc["topics"]:
                for p in t["partitions"] if t["name"] == topic else []:
                    if p["partition"] == 0 and p["leader"] == doc["broker_id"]:
                        for txn in p["open_transactions"]:
                            return int(txn["producer_id"])
        assert time.monotonic() < deadline, "no open transaction on partition 0"
        time.sleep(0.3)
