"""Binary produce frames on the WebSocket produce stream against a real broker: answers per
request id in order, error codes, idempotent duplicates, NOT_LEADER_OR_FOLLOWER, and what
ends the stream (docs/data-plane-api.md, "Binary produce frames")."""

from __future__ import annotations

import asyncio
import json
import struct

import aiohttp

from brokernodes.client.produce_stream import encode_binary_produce_header
from brokernodes.server.protocol.ws_frames import MAX_BINARY_HEADER_BYTES
from tests.integration.broker.test_ws import connect, recv_error_then_close, recv_json, run
from tests.integration.broker.util import batch, fetch_all_values

PATH = "/sluice/v1/ws/produce"


def frame(request_id: int, topic: str, partition: int, body: bytes) -> bytes:
    """Encoded by the SDK's own function, so these tests check it against the broker."""
    return encode_binary_produce_header(request_id, topic, partition) + body


async def exchange(broker, frames: list[bytes | str], path: str = PATH) -> list[dict]:
    """Send every frame (pipelined), then read one answer per frame."""
    async with connect(broker, path) as ws:
        for f in frames:
            if isinstance(f, bytes):
                await ws.send_bytes(f)
            else:
                await ws.send_str(f)
        return [await recv_json(ws) for _ in frames]


def test_binary_frames_are_answered_per_request_id_in_order(module_broker):
    b = module_broker
    frames: list[bytes | str] = [
        frame(i, "orders", i % 3, batch([b"bin-%d-a" % i, b"bin-%d-b" % i])) for i in range(1, 13)
    ]
    # a JSON text request on the same stream is answered in its place
    text = {"id": "text", "topic": "orders", "partition": 0, "records": [{"value": {"data": 1}}]}
    frames.insert(6, json.dumps(text))
    answers = run(exchange(b, frames))
    assert [a["id"] for a in answers] == [*range(1, 7), "text", *range(7, 13)]
    binary = [a for a in answers if a["id"] != "text"]
    assert all(a["last_offset"] == a["base_offset"] + 1 for a in binary), binary
    assert not any(a["duplicate"] for a in binary)
    for p in range(3):
        mine = [a for a in binary if a["id"] % 3 == p]
        bases = [a["base_offset"] for a in mine]
        assert bases == sorted(bases) and len(set(bases)) == len(bases)
        values = dict(fetch_all_values(b, "orders", p, bases[0]))
        for a in mine:
            assert values[a["base_offset"]] == b"bin-%d-a" % a["id"]
            assert values[a["last_offset"]] == b"bin-%d-b" % a["id"]


def test_binary_frame_errors_carry_codes_and_the_stream_goes_on(module_broker):
    b = module_broker
    good = batch([b"fine"])
    corrupt = bytearray(batch([b"will be damaged"]))
    corrupt[-3] ^= 0xFF  # inside the CRC-covered records
    answers = run(
        exchange(
            b,
            [
                frame(1, "no-such-topic", 0, good),
                frame(2, "orders", 9, good),
                frame(3, "events", 0, bytes(corrupt)),
                frame(4, "events", 0, b""),
                frame(5, "small", 0, batch([b"x" * 4096])),  # max.message.bytes 2048
                frame(6, "events", 0, b"\x00" * 30),  # not a batch
                frame(7, "events", 0, good),
            ],
        )
    )
    codes = {a["id"]: a.get("error_code") for a in answers}
    assert codes == {
        1: "UNKNOWN_TOPIC_OR_PARTITION",
        2: "UNKNOWN_TOPIC_OR_PARTITION",
        3: "CORRUPT_MESSAGE",
        4: "INVALID_REQUEST",
        5: "MESSAGE_TOO_LARGE",
        6: codes[6],
        7: None,
    }, answers
    assert codes[6] in ("CORRUPT_MESSAGE", "INVALID_RECORD"), answers[5]
    assert all(a["message"] for a in answers[:6])
    assert "batches" in answers[3]["message"]
    assert answers[6]["base_offset"] == answers[6]["last_offset"] >= 0


def test_a_resent_idempotent_batch_gets_its_original_offsets(module_broker):
    b = module_broker
    status, ids = b.json("POST", "/sluice/v1/producer-ids", {})
    assert status == 200, ids
    pid, epoch = ids["producer_id"], ids["producer_epoch"]

    def idem(values, seq):
        return batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    first = idem([b"i0", b"i1"], 0)
    answers = run(
        exchange(
            b,
            [
                frame(1, "events", 0, first),
                frame(2, "events", 0, first),  # a retry of request 1
                frame(3, "events", 0, idem([b"i2"], 2)),
                frame(4, "events", 0, idem([b"i9"], 9)),  # a gap
            ],
        )
    )
    assert answers[0]["duplicate"] is False and answers[1]["duplicate"] is True
    assert (answers[1]["base_offset"], answers[1]["last_offset"]) == (
        answers[0]["base_offset"],
        answers[0]["last_offset"],
    )
    assert answers[2]["base_offset"] == answers[0]["last_offset"] + 1
    assert answers[3]["error_code"] == "OUT_OF_ORDER_SEQUENCE_NUMBER", answers[3]
    values = [v for _, v in fetch_all_values(b, "events", 0, answers[0]["base_offset"])]
    assert values == [b"i0", b"i1", b"i2"]  # once each


def test_a_frame_for_an_unreachable_leader_is_answered_leader_not_available(broker_factory):
    """A frame for a partition led elsewhere goes on to the leader (docs/data-plane-api.md,
    "One front door"); this one cannot be reached: nothing was sent, a retriable error under
    the frame's id, and the stream goes on."""
    other = {"id": 2, "url": "http://127.0.0.1:1"}
    b = broker_factory({"split": (2, {})}, other_brokers=[other], leaders={"split": [1, 2]})
    answers = run(
        exchange(b, [frame(1, "split", 1, batch([b"x"])), frame(2, "split", 0, batch([b"y"]))])
    )
    assert answers[0]["id"] == 1
    assert answers[0]["error_code"] == "LEADER_NOT_AVAILABLE", answers[0]
    assert answers[1]["base_offset"] == 0


def test_a_frame_without_a_readable_header_ends_the_stream(module_broker):
    b = module_broker

    async def go(bad: bytes):
        async with connect(b, PATH) as ws:
            await ws.send_bytes(frame(1, "events", 0, batch([b"before"])))
            await ws.send_bytes(bad)
            answer = await recv_json(ws)
            return answer, *(await recv_error_then_close(ws))

    answer, error, code, reason = run(go(b"\x01\x02"))
    assert answer["id"] == 1 and answer["base_offset"] >= 0
    assert (code, reason) == (1008, "INVALID_REQUEST")
    assert "at least 15 bytes" in error["message"]
    other_version = struct.pack(">BQiH", 9, 2, 0, 6) + b"events" + batch([b"z"])
    _, error, code, _ = run(go(other_version))
    assert code == 1008 and "version 9" in error["message"]


def test_acks_zero_is_refused_before_the_upgrade(module_broker):
    status, _, body = module_broker.request("GET", PATH + "?acks=0")
    assert status == 400 and b"acks=0" in body


def test_a_binary_frame_over_the_request_limit_closes_with_1009(broker_factory):
    """The produce stream takes a binary frame of up to ``max_request_bytes`` of batches
    plus the largest binary header; a larger frame closes the stream with 1009 (message
    too big), as the HTTP endpoint answers REQUEST_TOO_LARGE (docs/data-plane-api.md)."""
    limit = 65536
    b = broker_factory({"events": (1, {})}, extra_args=["--max-request-bytes", str(limit)])
    fits = batch([b"f" * 65_000])
    too_big = batch([b"b" * (limit + MAX_BINARY_HEADER_BYTES)])
    assert len(fits) <= limit < len(too_big) - MAX_BINARY_HEADER_BYTES

    async def go():
        async with connect(b, PATH) as ws:
            await ws.send_bytes(frame(1, "events", 0, fits))
            answer = await recv_json(ws)
            await ws.send_bytes(frame(2, "events", 0, too_big))
            msg = await ws.receive(timeout=10)
            return answer, msg.type, ws.close_code

    answer, kind, code = run(go())
    assert answer["id"] == 1 and answer["base_offset"] == 0, answer
    assert (kind, code) == (aiohttp.WSMsgType.CLOSE, 1009)
    # only the frame that fit was appended
    assert [v for _, v in fetch_all_values(b, "events", 0)] == [b"f" * 65_000]


def test_sigterm_answers_the_frames_in_flight_in_order_then_closes(broker_factory):
    """acks=1 frames are appended by the stream's reader itself: a shutdown arriving among
    them answers every frame it took, in order, then closes with 1001; every acknowledged
    record is there after the restart."""
    b = broker_factory({"t": (1, {})})
    total = 200

    async def produce_through_shutdown():
        answers, close = [], None
        async with connect(b, PATH) as ws:
            for i in range(1, total + 1):
                await ws.send_bytes(frame(i, "t", 0, batch([b"r-%d" % i])))
            stopping = asyncio.create_task(asyncio.to_thread(b.stop))
            while True:
                msg = await ws.receive(timeout=10)
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    close = ws.close_code
                    break
                answers.append(json.loads(msg.data))
            return answers, close, await stopping

    answers, close, exit_code = run(produce_through_shutdown())
    assert exit_code == 0 and close in (1000, 1001), close
    # answers in the order sent, no gap; the last ones may be errors (refused while stopping)
    assert [a["id"] for a in answers] == list(range(1, len(answers) + 1))
    acked = [a for a in answers if "base_offset" in a]
    assert acked == answers[: len(acked)], "an error answer came before a success"
    assert "Traceback" not in b.output()
    b.start()
    values = dict(fetch_all_values(b, "t", 0, 0))
    for a in acked:
        assert values[a["base_offset"]] == b"r-%d" % a["id"]
