"""WebSocket streams against a real broker: produce acks, consume positions, the live tail,
credit-based flow control, auth, errors, clean close and shutdown (docs/data-plane-api.md)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from contextlib import asynccontextmanager

import aiohttp
import pytest

from brokernodes.records.header import iter_batches
from tests.integration.broker.util import batch, fetch_json, produce_binary, produce_json

TIMEOUT_S = 10.0
WS = aiohttp.WSMsgType


# --- helpers (every wait bounded) ---------------------------------------------------------


def run(coro, timeout: float = 30.0):
    """Run a test coroutine on a fresh event loop, bounded by ``timeout``."""

    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


@asynccontextmanager
async def connect(broker, path: str, *, auth: bool = True, headers=None):
    """An open WebSocket to ``path`` (with the bearer header unless ``auth=False``)."""
    hdrs = dict(broker.headers if auth else {})
    hdrs.update(headers or {})
    url = broker.url.replace("http://", "ws://") + path
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url,
            headers=hdrs,
            timeout=aiohttp.ClientWSTimeout(ws_receive=TIMEOUT_S, ws_close=TIMEOUT_S),
            max_msg_size=64 * 1024 * 1024,
        ) as ws,
    ):
        yield ws


async def handshake_status(broker, path: str, *, auth: bool = True, headers=None) -> int:
    """The HTTP status of a refused upgrade (fails if the upgrade succeeds)."""
    with pytest.raises(aiohttp.WSServerHandshakeError) as e:
        async with connect(broker, path, auth=auth, headers=headers):
            pass
    return e.value.status


async def recv_json(ws, timeout: float = TIMEOUT_S) -> dict:
    msg = await ws.receive(timeout=timeout)
    assert msg.type is WS.TEXT, (msg.type, msg.data, msg.extra)
    return json.loads(msg.data)


async def recv_close(ws, timeout: float = TIMEOUT_S) -> tuple[int | None, str]:
    """The next message must be the close: (code, reason)."""
    msg = await ws.receive(timeout=timeout)
    assert msg.type in (WS.CLOSE, WS.CLOSED), (msg.type, msg.data)
    return ws.close_code, msg.extra or ""


async def recv_error_then_close(ws) -> tuple[dict, int | None, str]:
    error = await recv_json(ws)
    code, reason = await recv_close(ws)
    return error, code, reason


async def recv_until_quiet(ws, quiet_s: float = 0.5) -> list[aiohttp.WSMessage]:
    """Every message that arrives until none has for ``quiet_s``."""
    got = []
    while True:
        try:
            msg = await ws.receive(timeout=quiet_s)
        except TimeoutError:
            return got
        assert msg.type in (WS.TEXT, WS.BINARY), (msg.type, msg.data)
        got.append(msg)


def metric(broker, name: str, labels: str = "") -> float | None:
    status, _, body = broker.request("GET", "/metrics", auth=False)
    assert status == 200
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else "") + r" (\S+)"
    m = re.search(pattern, body.decode())
    return float(m.group(1)) if m else None


def record(value, **kw) -> dict:
    return {"value": {"type": "STRING", "data": value}, **kw}


def end_offset(broker, topic: str, partition: int) -> int:
    status, body = broker.json(
        "GET", f"/sluice/v1/topics/{topic}/partitions/{partition}/offsets?timestamp=latest"
    )
    assert status == 200, body
    return body["offset"]


# --- produce --------------------------------------------------------------------------------


def test_produce_stream_acks_each_request_in_order_with_offsets(module_broker):
    b = module_broker
    start = end_offset(b, "events", 0)
    n = 40  # pipelined: all sent before any answer is read

    async def go():
        async with connect(b, "/sluice/v1/ws/produce") as ws:
            for i in range(n):
                records = [record(f"r{i}-{j}") for j in range(i % 3 + 1)]
                await ws.send_str(
                    json.dumps({"id": f"req-{i}", "topic": "events", "records": records})
                )
            return [await recv_json(ws) for _ in range(n)]

    answers = run(go())
    assert [a["id"] for a in answers] == [f"req-{i}" for i in range(n)]
    expected_offset = start
    expected_values = {}
    for i, a in enumerate(answers):
        assert "error_code" not in a, a
        assert [o["partition_id"] for o in a["offsets"]] == [0] * (i % 3 + 1)
        for j, o in enumerate(a["offsets"]):
            assert o["offset"] == expected_offset
            expected_values[expected_offset] = f"r{i}-{j}"
            expected_offset += 1
    status, got = fetch_json(b, "events", 0, start, max_records=1000)
    assert status == 200
    assert {r["offset"]: r["value"] for r in got["records"]} == expected_values


def test_produce_stream_errors_answer_their_id_and_later_requests_succeed(module_broker):
    b = module_broker
    requests = [
        {"id": 1, "topic": "orders", "partition": 1, "records": [record("ok-1")]},
        {"id": 2, "topic": "no-such-topic", "records": [record("x")]},
        {"id": 3, "topic": "orders", "records": [{"value": {"type": "BINARY", "data": "%%"}}]},
        {"id": 4, "topic": "orders", "partition": 99, "records": [record("x")]},
        {"id": 5, "topic": "orders", "records": [record("x")], "surprise": True},
        {"topic": "orders", "records": [record("no id")]},
        {"id": 7, "topic": "orders", "records": []},
        {"id": 8, "topic": "small", "records": [record("v" * 4000)]},
        {"id": "last", "topic": "orders", "partition": 1, "records": [record("ok-2")]},
    ]

    async def go():
        async with connect(b, "/sluice/v1/ws/produce") as ws:
            for r in requests:
                await ws.send_str(json.dumps(r))
            return [await recv_json(ws) for _ in requests]

    answers = run(go())
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5, None, 7, 8, "last"]
    codes = [a.get("error_code") for a in answers]
    assert codes == [
        None,
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_REQUEST",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "INVALID_REQUEST",
        "INVALID_REQUEST",
        "INVALID_REQUEST",
        "MESSAGE_TOO_LARGE",
        None,
    ]
    assert "records[0].value.data" in answers[2]["message"]
    assert all(a["message"] for a in answers if a.get("error_code"))
    first, last = answers[0]["offsets"][0]["offset"], answers[-1]["offsets"][0]["offset"]
    assert last == first + 1  # nothing from the failed requests was appended
    status, got = fetch_json(b, "orders", 1, first)
    assert status == 200
    assert [r["value"] for r in got["records"]] == ["ok-1", "ok-2"]


def test_produce_stream_closes_on_unparseable_frames_after_answering(module_broker):
    b = module_broker

    async def go(bad_frame):
        async with connect(b, "/sluice/v1/ws/produce") as ws:
            await ws.send_str(json.dumps({"id": "a", "topic": "events", "records": [record("x")]}))
            if isinstance(bad_frame, bytes):
                await ws.send_bytes(bad_frame)
            else:
                await ws.send_str(bad_frame)
            answer = await recv_json(ws)
            return answer, *(await recv_error_then_close(ws))

    answer, error, code, reason = run(go("{not json"))
    assert answer["id"] == "a" and answer["offsets"]
    assert error["error_code"] == "INVALID_REQUEST" and "JSON" in error["message"]
    assert (code, reason) == (1008, "INVALID_REQUEST")
    answer, error, code, _ = run(go(b"\x00\x01"))  # too short for a binary produce header
    assert answer["id"] == "a" and answer["offsets"]
    assert code == 1008 and "binary produce frame" in error["message"]
    answer, error, code, _ = run(go("[1, 2]"))
    assert code == 1008
    assert b.request("GET", "/healthz", auth=False)[0] == 200


def test_produce_stream_auth_by_first_message_and_refusals(module_broker):
    b = module_broker

    async def first_message_auth():
        async with connect(b, "/sluice/v1/ws/produce", auth=False) as ws:
            await ws.send_str(json.dumps({"auth": b.api_key}))
            await ws.send_str(json.dumps({"id": 1, "topic": "events", "records": [record("a")]}))
            return await recv_json(ws)

    assert run(first_message_auth())["offsets"]

    async def refused_in_band(first):
        async with connect(b, "/sluice/v1/ws/produce", auth=False) as ws:
            await ws.send_str(json.dumps(first))
            return await recv_error_then_close(ws)

    for first in (
        {"auth": "sk_test.wrong-secret"},
        {"id": 1, "topic": "events", "records": [record("a")]},  # no auth at all
    ):
        error, code, reason = run(refused_in_band(first))
        assert error["error_code"] == "UNAUTHENTICATED"
        assert (code, reason) == (4401, "UNAUTHENTICATED")
        assert "wrong-secret" not in json.dumps(error)

    bad = {"Authorization": "Bearer sk_test.wrong-secret"}
    assert run(handshake_status(b, "/sluice/v1/ws/produce", auth=False, headers=bad)) == 401
    assert run(handshake_status(b, "/sluice/v1/ws/produce?acks=0")) == 400
    status, _, body = b.request("GET", "/sluice/v1/ws/produce")
    assert status == 400 and json.loads(body)["error_code"] == "INVALID_REQUEST"
    assert "wrong-secret" not in b.output()


# --- consume --------------------------------------------------------------------------------


def test_consume_from_offset_earliest_latest_and_timestamp(module_broker):
    b = module_broker
    # ahead of every other record in the partition, within message.timestamp.after.max.ms
    ahead = int(time.time() * 1000) + 600_000
    offsets, stamps = [], [ahead + i * 1000 for i in range(4)]
    for i, ts in enumerate(stamps):
        status, ans = produce_json(
            b, "orders", record(f"pos-{i}", partition_id=2, timestamp=ts, key=None)
        )
        assert status == 200, ans
        offsets.append(ans["offset"])

    async def values(query, credit=1 << 20):
        async with connect(b, f"/sluice/v1/ws/consume?topic=orders&partition=2&{query}") as ws:
            await ws.send_str(json.dumps({"credit": credit}))
            got = []
            for msg in await recv_until_quiet(ws, 0.4):
                body = json.loads(msg.data)
                assert body["high_watermark"] >= offsets[-1] + 1
                got += [(r["offset"], r["value"], r["timestamp"]) for r in body["records"]]
            return got

    from_offset = run(values(f"offset={offsets[1]}"))
    assert from_offset == [(offsets[i], f"pos-{i}", stamps[i]) for i in (1, 2, 3)]
    earliest = run(values("from=earliest"))
    assert earliest[0][0] == 0 and earliest[-3:] == from_offset
    assert run(values("from=latest")) == []
    assert run(values(f"timestamp={stamps[2]}")) == from_offset[1:]
    assert run(values(f"timestamp={stamps[2] - 500}")) == from_offset[1:]
    # format=text and base64 render the same values
    by_b64 = run(values(f"offset={offsets[3]}&format=base64"))
    assert base64.b64decode(by_b64[0][1]) == b"pos-3"


def test_consume_live_tail_receives_records_produced_after_subscribing(module_broker):
    b = module_broker

    async def go():
        async with connect(b, "/sluice/v1/ws/consume?topic=events&from=latest") as ws:
            await ws.send_str(json.dumps({"credit": 1 << 20}))
            assert await recv_until_quiet(ws, 0.3) == []
            started = time.monotonic()
            status, ans = await asyncio.to_thread(produce_json, b, "events", record("tail-1"))
            assert status == 200
            body = await recv_json(ws)
            latency = time.monotonic() - started
            return ans["offset"], body, latency

    offset, body, latency = run(go())
    assert [(r["offset"], r["value"]) for r in body["records"]] == [(offset, "tail-1")]
    assert body["next_offset"] == offset + 1 and body["high_watermark"] == offset + 1
    assert latency < 2.0


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_consume_flow_control_holds_a_slow_consumer_within_its_credit(module_broker, fmt):
    b = module_broker
    start = end_offset(b, "orders", 0)
    sizes = []
    for i in range(20):  # 20 batches of about 600 bytes
        body = batch([b"%02d" % i + b"x" * 500, b"y" * 50])
        status, ans = produce_binary(b, "orders", 0, body)
        assert status == 200, ans
        sizes.append(len(body))
    total, largest = sum(sizes), max(sizes)

    def batch_bytes(msg) -> tuple[int, list[int]]:
        if fmt == "binary":
            assert msg.type is WS.BINARY
            headers = list(iter_batches(msg.data))
            return len(msg.data), [h.base_offset for h in headers]
        body = json.loads(msg.data)
        return body["batch_bytes"], sorted(
            {r["offset"] - (r["offset"] - start) % 2 for r in body["records"]}
        )

    async def go():
        path = f"/sluice/v1/ws/consume?topic=orders&partition=0&offset={start}&format={fmt}"
        async with connect(b, path) as ws:
            # no credit: nothing comes
            assert await recv_until_quiet(ws, 0.3) == []
            granted, received, bases = 0, 0, []
            for grant in (1500, 1, 2000):
                await ws.send_str(json.dumps({"credit": grant}))
                granted += grant
                for msg in await recv_until_quiet(ws, 0.4):
                    n, batch_bases = batch_bytes(msg)
                    received += n
                    bases += batch_bases
                # never more than one batch beyond the credit granted
                assert received < granted + largest, (received, granted)
                assert received <= total
            assert 0 < received < total
            # granting enough for the rest delivers exactly the rest
            await ws.send_str(json.dumps({"credit": total}))
            for msg in await recv_until_quiet(ws, 0.5):
                n, batch_bases = batch_bytes(msg)
                received += n
                bases += batch_bases
            return received, bases

    received, bases = run(go())
    assert received == total
    assert bases == [start + 2 * i for i in range(20)]


def test_consume_errors_and_auth(module_broker):
    b = module_broker
    base = "/sluice/v1/ws/consume"
    assert run(handshake_status(b, f"{base}?topic=orders&offset=999999999")) == 416
    assert run(handshake_status(b, f"{base}?topic=nope")) == 404
    assert run(handshake_status(b, f"{base}?topic=orders&partition=7")) == 404
    assert run(handshake_status(b, f"{base}?topic=orders&offset=1&from=latest")) == 400
    assert run(handshake_status(b, f"{base}?topic=orders&format=xml")) == 400
    assert (
        run(
            handshake_status(
                b, f"{base}?topic=orders", auth=False, headers={"Authorization": "Bearer x.y"}
            )
        )
        == 401
    )

    async def in_band(first, query="topic=orders&from=earliest"):
        async with connect(b, f"{base}?{query}", auth=False) as ws:
            await ws.send_str(json.dumps(first))
            return await recv_error_then_close(ws)

    error, code, _ = run(in_band({"credit": 100}))  # no key at all
    assert (error["error_code"], code) == ("UNAUTHENTICATED", 4401)
    error, code, _ = run(in_band({"auth": b.api_key}, "topic=orders&offset=999999999"))
    assert (error["error_code"], code) == ("OFFSET_OUT_OF_RANGE", 4416)
    assert error["log_end_offset"] >= 0

    async def bad_credit():
        async with connect(b, f"{base}?topic=orders&from=latest") as ws:
            await ws.send_str(json.dumps({"credit": -5}))
            return await recv_error_then_close(ws)

    error, code, reason = run(bad_credit())
    assert (error["error_code"], code, reason) == ("INVALID_REQUEST", 1008, "INVALID_REQUEST")

    async def browser_style():
        async with connect(b, f"{base}?topic=events&from=earliest", auth=False) as ws:
            await ws.send_str(json.dumps({"auth": b.api_key}))
            await ws.send_str(json.dumps({"credit": 100}))
            return await recv_json(ws)

    assert run(browser_style())["records"]


# --- lifecycle ------------------------------------------------------------------------------


def test_closing_clients_leaves_the_broker_healthy_and_the_gauge_at_zero(module_broker):
    b = module_broker
    gauge = "sluice_websocket_connections"

    async def go():
        async with (
            connect(b, "/sluice/v1/ws/consume?topic=events&from=latest") as consumer,
            connect(b, "/sluice/v1/ws/produce") as producer,
        ):
            await consumer.send_str(json.dumps({"credit": 1 << 20}))
            await producer.send_str(
                json.dumps({"id": 1, "topic": "events", "records": [record("c")]})
            )
            assert "offsets" in await recv_json(producer)
            assert (await recv_json(consumer))["records"]
            # a request in flight when the client goes away
            await producer.send_str(
                json.dumps({"id": 2, "topic": "events", "records": [record("d")]})
            )
            counts = [
                await asyncio.to_thread(metric, b, gauge, f'stream="{s}"')
                for s in ("produce", "consume")
            ]
        return counts

    assert run(go()) == [1.0, 1.0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if metric(b, gauge, 'stream="produce"') == 0 and metric(b, gauge, 'stream="consume"') == 0:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the WebSocket gauge did not go back to 0")
    status, ans = produce_json(b, "events", record("after"))
    assert status == 200
    status, got = fetch_json(b, "events", 0, ans["offset"] - 2)
    assert [r["value"] for r in got["records"]][-3:] == ["c", "d", "after"]
    assert (metric(b, "sluice_bytes_out_total", 'tenant="",topic="events"') or 0) > 0
    assert "Traceback" not in b.output()


def test_dead_peers_oversize_frames_and_sigterm(broker_factory):
    b = broker_factory(
        topics={"t": (1, {})},
        env={"SLUICE_WS_HEARTBEAT_S": "0.4"},
        extra_args=["--max-request-bytes", "65536"],
    )
    gauge = "sluice_websocket_connections"

    async def dead_peer():
        # a client that never answers pings is dropped after heartbeat * 1.5
        url = b.url.replace("http://", "ws://") + "/sluice/v1/ws/consume?topic=t"
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, headers=b.headers, autoping=False) as ws,
        ):
            started = time.monotonic()
            while True:
                msg = await ws.receive(timeout=5)
                if msg.type is not WS.PING:
                    break
            return msg.type, time.monotonic() - started

    kind, waited = run(dead_peer())
    assert kind in (WS.CLOSE, WS.CLOSED, WS.ERROR) and waited < 3
    for _ in range(100):
        if metric(b, gauge, 'stream="consume"') == 0:
            break
        time.sleep(0.05)
    assert metric(b, gauge, 'stream="consume"') == 0

    async def oversize():
        async with connect(b, "/sluice/v1/ws/produce") as ws:
            big = {"id": 1, "topic": "t", "records": [record("x" * 70_000)]}
            await ws.send_str(json.dumps(big))
            msg = await ws.receive(timeout=TIMEOUT_S)
            return msg.type, ws.close_code

    assert run(oversize()) == (WS.CLOSE, 1009)

    async def shutdown():
        async with (
            connect(b, "/sluice/v1/ws/consume?topic=t&from=latest") as consumer,
            connect(b, "/sluice/v1/ws/produce") as producer,
            connect(b, "/sluice/v1/ws/produce", auth=False) as not_yet_authenticated,
        ):
            await consumer.send_str(json.dumps({"credit": 1000}))
            await asyncio.sleep(0.2)  # the consumer is waiting on the live tail
            started = time.monotonic()
            stopping = asyncio.create_task(asyncio.to_thread(b.stop))
            closes = [await recv_close(ws) for ws in (consumer, producer, not_yet_authenticated)]
            return closes, time.monotonic() - started, await stopping

    closes, waited, exit_code = run(shutdown())
    assert [c[0] for c in closes] == [1001, 1001, 1001]
    assert waited < 3
    assert exit_code == 0
    assert "stopped cleanly" in b.output()
    assert "Traceback" not in b.output()
