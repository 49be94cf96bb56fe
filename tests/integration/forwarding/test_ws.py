"""One front door over WebSocket: consume and produce streams opened on broker 1 for
partitions of ``streams``, which brokers 2 and 3 lead."""

from __future__ import annotations

import asyncio
import json
import struct

import aiohttp
import pytest

from harness.broker import API_KEY
from harness.cluster import StaticCluster
from tests.integration.broker.util import batch, fetch_all_values, produce_binary

TIMEOUT_S = 10.0


def run(coro, timeout: float = 30.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def ws_url(broker, path: str) -> str:
    return broker.url.replace("http://", "ws://") + path


async def receive_json(ws) -> dict:
    msg = await ws.receive(timeout=TIMEOUT_S)
    assert msg.type is aiohttp.WSMsgType.TEXT, msg
    return json.loads(msg.data)


def test_consume_stream_through_a_non_leader(cluster: StaticCluster):
    front = cluster.broker(1)
    status, first = produce_binary(front, "streams", 0, batch([b"a", b"b"]), acks="all")
    assert status == 200, first
    start = first["base_offset"]

    async def main(first_frame_auth: bool) -> list[str]:
        path = f"/sluice/v1/ws/consume?topic=streams&partition=0&offset={start}&format=text"
        headers = {} if first_frame_auth else front.headers
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_url(front, path), headers=headers) as ws,
        ):
            if first_frame_auth:
                await ws.send_str(json.dumps({"auth": API_KEY}))
            await ws.send_str(json.dumps({"credit": 1 << 20}))
            values: list[str] = []
            while len(values) < 2:
                values += [r["value"] for r in (await receive_json(ws))["records"]]
            # the live tail, through the proxy
            await asyncio.to_thread(produce_binary, front, "streams", 0, batch([b"tail"]))
            while len(values) < 3:
                values += [r["value"] for r in (await receive_json(ws))["records"]]
            return values

    assert run(main(False))[:3] == ["a", "b", "tail"]
    assert run(main(True))[:2] == ["a", "b"]


def test_consume_stream_errors_come_from_the_leader(cluster: StaticCluster):
    front = cluster.broker(1)

    async def status_of(path: str, headers: dict) -> int:
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            async with (
                aiohttp.ClientSession() as s,
                s.ws_connect(ws_url(front, path), headers=headers),
            ):
                pass
        return e.value.status

    path = "/sluice/v1/ws/consume?topic=streams&partition=1&offset=999999"
    assert run(status_of(path, front.headers)) == 416
    # a request marked as forwarded is not forwarded again
    marked = {**front.headers, "Sluice-Forwarded": "2"}
    assert run(status_of("/sluice/v1/ws/consume?topic=streams&partition=1", marked)) == 421
    # no key: refused here, nothing reaches the leader
    bad = {"Authorization": "Bearer sk_test.wrong"}
    assert run(status_of("/sluice/v1/ws/consume?topic=streams&partition=1", bad)) == 401


def binary_frame(request_id: int, topic: str, partition: int, body: bytes) -> bytes:
    name = topic.encode()
    return struct.pack(">BQiH", 1, request_id, partition, len(name)) + name + body


@pytest.mark.parametrize("acks", ["1", "all"])
def test_produce_stream_through_a_non_leader(cluster: StaticCluster, acks: str):
    front = cluster.broker(1)

    async def main() -> list[dict]:
        path = f"/sluice/v1/ws/produce?acks={acks}"
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_url(front, path), headers=front.headers) as ws,
        ):
            # pipelined: binary frames for both partitions, and a text frame spanning them
            for i in range(10):
                await ws.send_bytes(binary_frame(i, "streams", i % 2, batch([f"bin{i}".encode()])))
            records = [
                {"partition_id": i % 2, "value": {"type": "STRING", "data": f"txt{i}"}}
                for i in range(6)
            ]
            await ws.send_str(json.dumps({"id": "t", "topic": "streams", "records": records}))
            return [await receive_json(ws) for _ in range(11)]

    answers = run(main())
    assert [a["id"] for a in answers] == [*range(10), "t"]
    assert all("error_code" not in a for a in answers), answers
    offsets = {(i % 2): [] for i in range(2)}
    for i, a in enumerate(answers[:10]):
        offsets[i % 2].append(a["base_offset"])
    for p in (0, 1):  # frames of one partition appended in the order sent
        assert offsets[p] == sorted(offsets[p])
    text = answers[10]["offsets"]
    assert [o["partition_id"] for o in text] == [i % 2 for i in range(6)]
    leaders = {0: cluster.broker(2), 1: cluster.broker(3)}
    for p in (0, 1):
        stored = dict(fetch_all_values_when(leaders[p], p, text[-2 + p]["offset"]))
        for i, a in enumerate(answers[:10]):
            if i % 2 == p:
                assert stored[a["base_offset"]] == f"bin{i}".encode()
        for i, o in enumerate(text):
            if i % 2 == p:
                assert stored[o["offset"]] == f"txt{i}".encode()


def fetch_all_values_when(leader, partition: int, last_offset: int) -> list:
    """(offset, value) of a partition once its high watermark passed ``last_offset``."""
    for _ in range(200):
        values = fetch_all_values(leader, "streams", partition)
        if values and values[-1][0] >= last_offset:
            return values
        asyncio.run(asyncio.sleep(0.05))
    raise AssertionError("the records did not become readable")


def test_produce_stream_marked_forwarded_answers_421(cluster: StaticCluster):
    front = cluster.broker(1)

    async def main() -> dict:
        headers = {**front.headers, "Sluice-Forwarded": "3"}
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_url(front, "/sluice/v1/ws/produce"), headers=headers) as ws,
        ):
            await ws.send_bytes(binary_frame(1, "streams", 0, batch([b"x"])))
            return await receive_json(ws)

    answer = run(main())
    assert answer["error_code"] == "NOT_LEADER_OR_FOLLOWER" and answer["leader_id"] == 2


def test_in_band_errors_of_a_proxied_stream_keep_their_close_codes(cluster: StaticCluster):
    """With the key in the first frame, the leader's refusal arrives in band: an error frame,
    then the close code of that error."""
    front = cluster.broker(1)

    async def main() -> tuple[dict, int | None]:
        path = "/sluice/v1/ws/consume?topic=streams&partition=1&offset=999999"
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(ws_url(front, path)) as ws,
        ):
            await ws.send_str(json.dumps({"auth": API_KEY}))
            error = await receive_json(ws)
            closed = await ws.receive(timeout=TIMEOUT_S)
            assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return error, ws.close_code

    error, code = run(main())
    assert error["error_code"] == "OFFSET_OUT_OF_RANGE" and code == 4416
