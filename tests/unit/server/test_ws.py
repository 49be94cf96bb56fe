"""WebSocket streams without a broker process: message parsing, the in-flight window, the
JSON rendering of batches, and the socket registry closing streams by API key."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer

from brokernodes.errors import InvalidRequestError, UnauthenticatedError
from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import StaticMetadataSource
from brokernodes.server.protocol.json_records import render_batches
from brokernodes.server.protocol.ws_frames import (
    ProtocolViolation,
    RequestError,
    auth_token,
    load_frame,
    parse_consume_query,
    parse_credit,
    parse_produce_request,
)
from brokernodes.server.ws.produce import InFlightWindow
from brokernodes.server.ws_registry import WebSocketRegistry, WebSocketSession, close_code_for

# --- protocol -------------------------------------------------------------------------------


def test_parse_produce_request():
    req = parse_produce_request(
        {
            "id": "a",
            "topic": "t",
            "partition": 2,
            "records": [{"value": {"data": 1}}, {"partition_id": 0, "value": None}],
        }
    )
    assert (req.id, req.topic) == ("a", "t")
    assert [e.partition for e in req.entries] == [2, 0]
    assert req.entries[0].value == b"1"


@pytest.mark.parametrize(
    ("doc", "request_id", "where"),
    [
        ({"topic": "t", "records": [{}]}, None, "id"),
        ({"id": True, "topic": "t", "records": [{}]}, None, "id"),
        ({"id": 1.5, "topic": "t", "records": [{}]}, None, "id"),
        ({"id": 1, "records": [{}]}, 1, "topic"),
        ({"id": 1, "topic": "t", "records": []}, 1, "records"),
        ({"id": 1, "topic": "t", "partition": -1, "records": [{}]}, 1, "partition"),
        ({"id": 1, "topic": "t", "records": [{"value": {"type": "X"}}]}, 1, "records[0]"),
        ({"id": 1, "topic": "t", "records": [{}], "x": 1}, 1, "unknown field"),
        ({"id": 1, "topic": "t", "records": [{}] * 1001}, 1, "at most 1000"),
    ],
)
def test_parse_produce_request_errors_name_the_request_and_field(doc, request_id, where):
    with pytest.raises(RequestError) as e:
        parse_produce_request(doc)
    assert e.value.request_id == request_id
    assert where in e.value.message
    assert e.value.error_code == "INVALID_REQUEST"


def test_frames_that_end_the_stream():
    with pytest.raises(ProtocolViolation):
        load_frame(b"{nope")
    with pytest.raises(ProtocolViolation):
        parse_produce_request([1])
    assert auth_token({"auth": "k.s"}) == "k.s"
    assert auth_token({"auth": "k.s", "x": 1}) is None
    assert auth_token({"credit": 1}) is None


def test_parse_credit():
    assert parse_credit({"credit": 0}) == 0
    assert parse_credit({"credit": 4096}) == 4096
    for bad in ({"credit": -1}, {"credit": 1.5}, {"credit": True}, {"credit": 2**41}, {}, [1]):
        with pytest.raises(ProtocolViolation):
            parse_credit(bad)


def test_parse_consume_query():
    kw = {"default_max_bytes": 100, "max_fetch_bytes": 1000}
    p = parse_consume_query({"topic": "t"}, **kw)
    assert (p.topic, p.partition, p.start, p.format, p.max_bytes) == ("t", 0, "latest", "json", 100)
    p = parse_consume_query(
        {"topic": "t", "partition": "2", "offset": "7", "format": "binary"}, **kw
    )
    assert (p.partition, p.start, p.value, p.format) == (2, "offset", 7, "binary")
    p = parse_consume_query({"topic": "t", "timestamp": "123", "max_bytes": "1000"}, **kw)
    assert (p.start, p.value, p.max_bytes) == ("timestamp", 123, 1000)
    assert parse_consume_query({"topic": "t", "from": "earliest"}, **kw).start == "earliest"
    for bad in (
        {},
        {"topic": "t", "offset": "1", "from": "latest"},
        {"topic": "t", "from": "middle"},
        {"topic": "t", "format": "xml"},
        {"topic": "t", "max_bytes": "1001"},
        {"topic": "t", "offset": "-1"},
    ):
        with pytest.raises(InvalidRequestError):
            parse_consume_query(bad, **kw)


def test_close_codes():
    assert close_code_for(UnauthenticatedError("x")) == 4401
    assert close_code_for(InvalidRequestError("x")) == 4400
    from brokernodes.errors import KafkaStorageError, OffsetOutOfRangeError

    assert close_code_for(OffsetOutOfRangeError("x")) == 4416
    assert close_code_for(KafkaStorageError("x")) == 1011


# --- in-flight window -----------------------------------------------------------------------


def test_in_flight_window_blocks_the_reader_until_answers_are_sent():
    async def main():
        w = InFlightWindow(max_requests=2, max_bytes=100)
        await w.acquire(10)
        await w.acquire(10)
        third = asyncio.create_task(w.acquire(10))
        await asyncio.sleep(0.01)
        assert not third.done()  # two pending: the reader stops
        w.release(10)
        await asyncio.wait_for(third, 1)
        w.release(10)
        w.release(10)
        await w.acquire(500)  # alone, a large request is let in
        big = asyncio.create_task(w.acquire(1))
        await asyncio.sleep(0.01)
        assert not big.done()  # over the byte budget
        w.release(500)
        await asyncio.wait_for(big, 1)

    asyncio.run(main())


# --- rendering ------------------------------------------------------------------------------


def test_render_batches_skips_before_offset_and_timestamp():
    first = bytearray(encode_batch([Record(100, None, b"a"), Record(300, None, b"b")]))
    first[0:8] = (10).to_bytes(8, "big")
    second = bytearray(encode_batch([Record(400, None, b'{"c": 1}')]))
    second[0:8] = (12).to_bytes(8, "big")
    raw = bytes(first + second)
    records, next_offset = render_batches(raw, 11, "json")
    assert [(r["offset"], r["value"]) for r in records] == [(11, "b"), (12, {"c": 1})]
    assert next_offset == 13
    records, _ = render_batches(raw, 10, "text", min_timestamp=200)
    assert [r["offset"] for r in records] == [11, 12]
    records, next_offset = render_batches(raw, 10, "text", max_records=1)
    assert [r["offset"] for r in records] == [10] and next_offset == 11


# --- the registry, in process ---------------------------------------------------------------


def test_registry_counts_and_closes_by_key():
    async def main():
        reg = WebSocketRegistry()
        a, b, c = (
            WebSocketSession("produce"),
            WebSocketSession("consume"),
            WebSocketSession("consume"),
        )
        for s in (a, b, c):
            reg.add(s)
        reg.bind(a, "k1", "User:a")
        reg.bind(b, "k1", "User:a")
        reg.bind(c, "k2", "User:c")
        assert (reg.count(), reg.count("consume")) == (3, 2)
        assert reg.close_key("k1", UnauthenticatedError("revoked")) == 2
        assert a.ending.result()[0] == 4401 and b.ended and not c.ended
        for s in (a, b):
            reg.remove(s)
        assert reg.sessions_for_key("k1") == []
        assert reg.close_all() == 1 and c.ending.result() == (1001, None)
        reg.remove(c)
        await reg.wait_closed(0.1)
        assert reg.count() == 0

    asyncio.run(main())


def _broker(tmp_path) -> Broker:
    meta = tmp_path / "m.json"
    keys = [("k1", "s1"), ("k2", "s2")]
    meta.write_text(
        json.dumps(
            {
                "cluster_id": "c",
                "broker_id": 1,
                "brokers": [{"id": 1, "url": "http://127.0.0.1:1"}],
                "topics": [{"name": "t", "topic_id": "x", "partitions": 1, "leaders": [1]}],
                "api_keys": [
                    {
                        "key_id": k,
                        "secret_sha256": hashlib.sha256(s.encode()).hexdigest(),
                        "principal": f"User:{k}",
                    }
                    for k, s in keys
                ],
            }
        )
    )
    config = BrokerConfig(str(meta), str(tmp_path / "data"), 0, fsync=False)
    return Broker(config, StaticMetadataSource(meta))


def test_revoking_a_key_closes_its_open_sockets_only(tmp_path):
    broker = _broker(tmp_path)
    app = build_app(broker)

    async def main():
        await broker.start()
        try:
            async with TestClient(TestServer(app)) as client:
                h1 = {"Authorization": "Bearer k1.s1"}
                h2 = {"Authorization": "Bearer k2.s2"}
                p1 = await client.ws_connect("/sluice/v1/ws/produce", headers=h1)
                c1 = await client.ws_connect("/sluice/v1/ws/consume?topic=t", headers=h1)
                p2 = await client.ws_connect("/sluice/v1/ws/produce", headers=h2)
                await c1.send_json({"credit": 100})
                await p2.send_json({"id": 0, "topic": "t", "records": [{"value": {"data": 0}}]})
                assert "offsets" in await p2.receive_json(timeout=5)
                reg = broker.websockets
                assert (reg.count("produce"), reg.count("consume")) == (2, 1)
                n = reg.close_key("k1", UnauthenticatedError("API key k1 was revoked"))
                assert n == 2
                for ws in (p1, c1):
                    error = await ws.receive_json(timeout=5)
                    if "records" in error:  # the consumer saw k2's record first
                        error = await ws.receive_json(timeout=5)
                    assert error["error_code"] == "UNAUTHENTICATED"
                    msg = await ws.receive(timeout=5)
                    assert msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED)
                    assert ws.close_code == 4401
                # the other key's socket is untouched
                await p2.send_json({"id": 1, "topic": "t", "records": [{"value": {"data": 1}}]})
                assert (await p2.receive_json(timeout=5))["offsets"][0]["offset"] == 1
                await p2.close()
                for _ in range(100):
                    if reg.count() == 0:
                        break
                    await asyncio.sleep(0.01)
                assert reg.count() == 0
                metrics = (await (await client.get("/metrics")).read()).decode()
                assert 'sluice_websocket_connections{stream="produce"} 0.0' in metrics
                assert 'endpoint="ws_' not in metrics  # no latency samples for sockets
        finally:
            await broker.close()

    asyncio.run(asyncio.wait_for(main(), 20))
