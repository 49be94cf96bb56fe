"""A forwarded call while its leader fails: a retriable error, never a lost or doubled
record. Broker 1 forwards to broker 2, the leader; broker 3 (a follower) is paused so an
acks=all produce waits on the leader, which is then killed mid-call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

import aiohttp

from brokernodes.records.batch import Record, encode_batch
from harness.cluster import start_static_cluster
from tests.integration.broker.util import fetch_all_values, fetch_binary, produce_binary


def test_a_forwarded_call_during_leader_failure_is_retriable_and_never_doubles(launcher):
    cluster = start_static_cluster(launcher, {"fo": (1, {})}, leaders={"fo": [2]}, lag_ms=20_000)
    front, leader, follower = (cluster.broker(i) for i in (1, 2, 3))
    status, ids = front.json("POST", "/sluice/v1/producer-ids")
    assert status == 200, ids
    pid, epoch = ids["producer_id"], ids["producer_epoch"]

    def idempotent(seq: int, value: bytes) -> bytes:
        ts = int(time.time() * 1000)
        return encode_batch(
            [Record(ts, None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
        )

    status, doc = produce_binary(front, "fo", 0, idempotent(0, b"first"), acks="all")
    assert status == 200, doc
    lost = idempotent(1, b"in-flight")
    answers: list = []
    os.kill(follower.pid, signal.SIGSTOP)  # the acks=all wait now lasts (ISR not shrunk yet)
    try:
        call = threading.Thread(
            target=lambda: answers.append(produce_binary(front, "fo", 0, lost, acks="all"))
        )
        call.start()
        time.sleep(1.0)
        leader.kill()  # mid-call: the request reached the leader, its answer is lost
        call.join(15)
        assert not call.is_alive()
        status, doc = answers[0]
        assert status == 503 and doc["error_code"] == "NETWORK_EXCEPTION", doc
        # the leader down: nothing can reach it, nothing is sent, a retriable 503
        status, doc = produce_binary(front, "fo", 0, idempotent(2, b"refused"))
        assert status == 503 and doc["error_code"] == "LEADER_NOT_AVAILABLE", doc
        status, _, body = fetch_binary(front, "fo", 0, 0)
        assert status == 503 and b"LEADER_NOT_AVAILABLE" in body
    finally:
        os.kill(follower.pid, signal.SIGCONT)
    leader.start()  # restarts uncleanly and leads again (static metadata)
    # the caller retries what it did not get an answer for: stored once whatever happened
    for _ in range(100):
        status, doc = produce_binary(front, "fo", 0, lost, acks="all")
        if status == 200:
            break
        assert status in (421, 500, 503), doc
        time.sleep(0.1)
    assert status == 200, doc
    status, doc = produce_binary(front, "fo", 0, idempotent(2, b"after"), acks="all")
    assert status == 200, doc
    values = [v for _, v in fetch_all_values(front, "fo", 0)]
    assert values == [b"first", b"in-flight", b"after"]


def test_a_proxied_consume_stream_whose_leader_dies_ends_retriably(launcher):
    cluster = start_static_cluster(launcher, {"fo": (1, {})}, leaders={"fo": [2]})
    front, leader = cluster.broker(1), cluster.broker(2)
    assert produce_binary(front, "fo", 0, encode_batch([Record(0, None, b"r0")]))[0] == 200

    async def main() -> tuple[list, aiohttp.WSMessage, int | None]:
        url = front.url.replace("http://", "ws://") + (
            "/sluice/v1/ws/consume?topic=fo&partition=0&from=earliest&format=text"
        )
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(url, headers=front.headers) as ws,
        ):
            await ws.send_str(json.dumps({"credit": 1 << 20}))
            first = json.loads((await ws.receive(timeout=10)).data)["records"]
            await asyncio.to_thread(leader.kill)
            error = await ws.receive(timeout=10)
            closed = await ws.receive(timeout=10)
            assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return first, error, ws.close_code

    first, error, code = asyncio.run(asyncio.wait_for(main(), 30))
    assert [r["value"] for r in first] == ["r0"]
    assert json.loads(error.data)["error_code"] == "LEADER_NOT_AVAILABLE"
    assert code == 1011
