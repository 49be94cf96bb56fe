"""A read_committed reader that starts at "latest" starts at the last stable offset, as a
Kafka read_committed consumer resetting to latest does: a transaction open at that moment
is delivered once it commits. Every start of Sluice's own API is checked (a new cursor's
``from=latest`` and future timestamp, the WebSocket's ``from=latest``, the SDK consumer's
``latest`` reset, which REST v2 instances run too, and over the Kafka protocol a
librdkafka consumer's reset to the end, ListOffsets latest) against a real broker on loopback whose
log holds an open transaction (``write_mixed_log``: producer 13's ``o0`` at offset 8, the
LSO, then the plain ``p1``; high watermark 10); starting at the high watermark would skip
``o0``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import aiohttp
import pytest
from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka import Consumer as KafkaConsumer

from brokernodes.client.consumer import Consumer
from tests.integration.kafka.conftest import confluent_config
from tests.integration.kafka.txn_loop_broker import (
    API_KEY,
    TIMEOUT_S,
    TOPIC,
    LoopBroker,
    write_mixed_log,
)

OPEN_TXN_PID = 13
AFTER_COMMIT = ["o0", "p1"]


@pytest.fixture
def node(tmp_path) -> Iterator[LoopBroker]:
    b = LoopBroker(tmp_path)
    try:
        write_mixed_log(b)
        assert (b.partition.last_stable_offset, b.partition.log.high_watermark) == (8, 10)
        yield b
    finally:
        b.close()


def call(node: LoopBroker, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        node.url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            data = r.read()
            return r.status, json.loads(data) if data else {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def cursor_values(node: LoopBroker, cursor: str, query: str) -> tuple[list[str], str]:
    status, doc = call(node, "GET", f"/sluice/v1/cursors/{cursor}?format=text&{query}")
    assert status == 200, doc
    return [r["value"] for r in doc["records"]], doc["next_cursor"]


def test_a_read_committed_cursor_from_latest_starts_at_the_lso(node):
    status, doc = call(
        node, "GET", f"/sluice/v1/topics/{TOPIC}/cursor?from=latest&isolation=read_committed"
    )
    assert status == 200, doc
    committed = doc["cursor"]
    _, doc = call(node, "GET", f"/sluice/v1/topics/{TOPIC}/cursor?from=latest")
    uncommitted = doc["cursor"]
    got, committed = cursor_values(node, committed, "isolation=read_committed")
    assert got == []  # the open transaction holds the reader at the LSO
    node.end_txn(OPEN_TXN_PID, commit=True)
    got, _ = cursor_values(node, committed, "isolation=read_committed")
    assert got == AFTER_COMMIT
    # read_uncommitted's latest is still the high watermark: nothing before it comes
    got, _ = cursor_values(node, uncommitted, "isolation=read_uncommitted")
    assert got == []


def test_a_read_committed_cursor_from_a_future_timestamp_starts_at_the_lso(node):
    future = int(time.time() * 1000) + 3_600_000
    _, doc = call(
        node, "GET", f"/sluice/v1/topics/{TOPIC}/cursor?from={future}&isolation=read_committed"
    )
    node.end_txn(OPEN_TXN_PID, commit=True)
    got, _ = cursor_values(node, doc["cursor"], "isolation=read_committed")
    assert got == AFTER_COMMIT


def test_a_read_committed_websocket_from_latest_gets_the_transaction_once_committed(node):
    async def main() -> list[str]:
        got: list[str] = []
        url = (
            f"{node.url}/sluice/v1/ws/consume?topic={TOPIC}&from=latest&format=text"
            "&isolation=read_committed"
        )
        async with (
            aiohttp.ClientSession() as s,
            # with the key in the header the start is resolved before the upgrade answers
            s.ws_connect(url, headers={"Authorization": f"Bearer {API_KEY}"}) as ws,
        ):
            await node.partition.write_txn_marker(OPEN_TXN_PID, 0, True, 0)
            await ws.send_json({"credit": 1 << 20})
            while len(got) < len(AFTER_COMMIT):
                msg = await ws.receive(timeout=TIMEOUT_S)
                assert msg.type == aiohttp.WSMsgType.TEXT, msg
                got += [r["value"] for r in json.loads(msg.data)["records"]]
        return got

    assert node.call(main()) == AFTER_COMMIT


def test_the_sdk_consumers_latest_reset_under_read_committed_starts_at_the_lso(node):
    consumer = Consumer(
        node.url,
        API_KEY,
        isolation_level="read_committed",
        auto_offset_reset="latest",
        fetch_max_wait_ms=200,
    )
    try:
        consumer.assign([(TOPIC, 0)])
        assert consumer.position((TOPIC, 0)) == 8  # the reset, done before the commit
        node.end_txn(OPEN_TXN_PID, commit=True)
        got: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(AFTER_COMMIT) and time.monotonic() < deadline:
            got += [r.value.decode() for r in consumer.poll(0.5)]
        assert got == AFTER_COMMIT
    finally:
        consumer.close()


def test_a_kafka_read_committed_consumer_reset_to_the_end_gets_the_transaction(node):
    consumer = KafkaConsumer(
        confluent_config(
            node.bootstrap,
            **{
                "group.id": "rc-latest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
        deadline = time.monotonic() + TIMEOUT_S
        high = -1
        while high < 0 and time.monotonic() < deadline:
            # a fetch answer (its watermark cached) means the reset to the end came first
            assert consumer.poll(0.2) is None
            high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), cached=True)[1]
        assert high >= 0
        node.end_txn(OPEN_TXN_PID, commit=True)
        got: list[str] = []
        while len(got) < len(AFTER_COMMIT) and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value().decode())
        assert got == AFTER_COMMIT
    finally:
        consumer.close()
