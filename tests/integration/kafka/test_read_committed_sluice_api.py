"""``isolation=read_committed`` over Sluice's own API against transactional data: the HTTP
JSON and binary fetches, list offsets, the WebSocket consume stream (JSON and binary) and the
SDK consumer in both fetch modes, over real loopback HTTP to a broker whose log receives
markers through the partition API (``txn_loop_broker``)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import aiohttp
import pytest

from brokernodes.client.consumer import Consumer
from brokernodes.records.batch import Record, decode_batches, encode_batch
from tests.integration.kafka.txn_loop_broker import (
    API_KEY,
    TIMEOUT_S,
    TOPIC,
    LoopBroker,
    write_mixed_log,
)

COMMITTED = ["c0", "c1", "p0"]
EVERYTHING = ["c0", "c1", "a0", "a1", "a2", "p0", "o0", "p1"]


@pytest.fixture
def node(tmp_path) -> Iterator[LoopBroker]:
    b = LoopBroker(tmp_path)
    try:
        write_mixed_log(b)
        yield b
    finally:
        b.close()


def get(node: LoopBroker, path: str) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(node.url + path, headers={"Authorization": f"Bearer {API_KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


PART = f"/sluice/v1/topics/{TOPIC}/partitions/0"


def json_values(body: bytes) -> list[str]:
    return [r["value"] for r in json.loads(body)["records"]]


def test_http_json_fetch_drops_aborted_records_and_stops_at_the_lso(node):
    status, _, body = get(node, PART + "/records?offset=0&format=text&isolation=read_committed")
    assert status == 200
    doc = json.loads(body)
    assert json_values(body) == COMMITTED
    assert (doc["next_offset"], doc["last_stable_offset"], doc["high_watermark"]) == (8, 8, 10)
    status, _, body = get(node, PART + "/records?offset=0&format=text")
    assert json_values(body) == EVERYTHING
    assert "last_stable_offset" not in json.loads(body)
    # from inside the aborted transaction: nothing of it, then the plain record
    _, _, body = get(node, PART + "/records?offset=3&format=text&isolation=read_committed")
    assert json_values(body) == ["p0"]


def test_http_binary_fetch_names_the_aborted_transactions(node):
    status, headers, body = get(node, PART + "/batches?offset=0&isolation=read_committed")
    assert status == 200
    assert headers["Sluice-Last-Stable-Offset"] == "8"
    assert headers["Sluice-Aborted-Transactions"] == "12:2:7"
    assert max(b.header.last_offset for b in decode_batches(body)) == 7  # below the LSO
    _, headers, _ = get(node, PART + "/batches?offset=0")
    assert "Sluice-Aborted-Transactions" not in headers


def test_list_offsets_latest_is_the_lso_for_read_committed(node):
    _, _, body = get(node, PART + "/offsets?timestamp=latest&isolation=read_committed")
    assert json.loads(body)["offset"] == 8
    _, _, body = get(node, PART + "/offsets?timestamp=latest")
    assert json.loads(body)["offset"] == 10


def test_a_wrong_isolation_is_a_clear_400(node):
    status, _, body = get(node, PART + "/records?offset=0&isolation=serializable")
    assert status == 400
    doc = json.loads(body)
    assert doc["error_code"] == "INVALID_REQUEST"
    assert "read_uncommitted, read_committed" in doc["message"]


def ws_consume(node: LoopBroker, fmt: str, want: int) -> list:
    """Frames' records (json) or batches' values (binary) until ``want`` values came."""

    async def main() -> list:
        got: list = []
        async with aiohttp.ClientSession() as s:
            url = (
                f"{node.url}/sluice/v1/ws/consume?topic={TOPIC}&from=earliest&format={fmt}"
                "&isolation=read_committed"
            )
            async with s.ws_connect(url, headers={"Authorization": f"Bearer {API_KEY}"}) as ws:
                await ws.send_json({"credit": 1 << 20})
                while len(got) < want:
                    msg = await ws.receive(timeout=TIMEOUT_S)
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        frame = json.loads(msg.data)
                        assert frame["last_stable_offset"] == 8
                        got += [r["value"] for r in frame["records"]]
                    elif msg.type == aiohttp.WSMsgType.BINARY:
                        got += [
                            r.value.decode()
                            for b in decode_batches(msg.data)
                            if not b.header.is_control
                            for r in b.records
                        ]
                    else:
                        raise AssertionError(f"stream ended: {msg}")
        return got

    return node.call(main())


def test_websocket_consume_read_committed_json_and_binary(node):
    assert ws_consume(node, "text", 3) == COMMITTED
    assert ws_consume(node, "binary", 3) == COMMITTED


@pytest.mark.parametrize("mode", ["long_poll", "websocket"])
def test_sdk_consumer_read_committed(node, mode):
    consumer = Consumer(
        node.url,
        API_KEY,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        fetch_mode=mode,
        fetch_max_wait_ms=200,
    )
    try:
        consumer.assign([(TOPIC, 0)])
        got: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value.decode() for r in consumer.poll(0.5)]
        assert got == COMMITTED
        assert consumer.poll(1.0) == []  # the open transaction holds the rest back
        node.end_txn(13, commit=True)
        while len(got) < 5 and time.monotonic() < deadline:
            got += [r.value.decode() for r in consumer.poll(0.5)]
        assert got == [*COMMITTED, "o0", "p1"]
    finally:
        consumer.close()


def test_binary_produce_refuses_transactional_batches_without_a_transactional_id(node):
    batch = encode_batch(
        [Record(1, None, b"x")],
        producer_id=99,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    req = urllib.request.Request(
        node.url + PART + "/batches",
        data=batch,
        method="POST",
        headers={
            "Authorization": f"Bearer {API_KEY}",
            "Content-Type": "application/vnd.kafka.recordbatch.v2",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=TIMEOUT_S)
    # without the producer's transactional_id nothing can verify it with a coordinator
    assert e.value.code == 403
    doc = json.loads(e.value.read())
    assert doc["error_code"] == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert "transactional_id" in doc["message"]
    # no transaction was opened: the LSO is where the mixed log left it
    assert node.partition.last_stable_offset == 8
    assert node.partition.log.log_end_offset == 10


def test_sdk_consumer_rejects_an_unknown_isolation_level(node):
    with pytest.raises(ValueError, match="isolation_level must be one of"):
        Consumer(node.url, API_KEY, isolation_level="serializable")


def test_cursor_reads_take_the_isolation(node):
    _, _, body = get(node, f"/sluice/v1/topics/{TOPIC}/cursor?from=earliest")
    cursor = json.loads(body)["cursor"]
    status, _, body = get(node, f"/sluice/v1/cursors/{cursor}?format=text&isolation=read_committed")
    assert status == 200, body
    assert json_values(body) == COMMITTED
    _, _, body = get(node, f"/sluice/v1/cursors/{cursor}?format=text")
    assert json_values(body) == EVERYTHING
