"""Pipelined binary produce on one connection against a real broker process: a raw-socket
client writes several requests at once to a partition under ``flush.messages=1`` with
acks=all (the group commit's case); the answers come back in request order, the records are
appended in that order, a failing request in the middle gets its own answer without
disturbing the others, a fetch or a hand-off in the pipeline waits its turn, and a client
that closes mid-pipeline leaves the log a prefix of what it sent."""

from __future__ import annotations

import json
import socket
import time

from brokernodes.records.batch import decode_batches
from tests.integration.broker.util import BINARY, batch, fetch_all_values

TOPIC = "durable"
TOPICS = {TOPIC: (1, {"flush.messages": "1"})}
PATH = f"/sluice/v1/topics/{TOPIC}/partitions/0/batches"


def _produce(auth: str, body: bytes, acks: str = "all") -> bytes:
    return (
        f"POST {PATH}?acks={acks} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
        f"Content-Type: {BINARY}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _get(path: str, auth: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n".encode()


def _read_answers(sock: socket.socket, count: int, timeout: float = 20.0) -> list[tuple]:
    """``count`` answers: (status, headers, body bytes), in the order received."""
    buf = bytearray()
    answers: list[tuple[int, dict[str, str], bytes]] = []
    deadline = time.monotonic() + timeout
    while len(answers) < count:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])
            }
            length = int(headers["content-length"])
            if len(buf) >= end + 4 + length:
                body = bytes(buf[end + 4 : end + 4 + length])
                del buf[: end + 4 + length]
                answers.append((int(lines[0].split(" ")[1]), headers, body))
                continue
        assert time.monotonic() < deadline, f"only {len(answers)} of {count} answers"
        chunk = sock.recv(65536)
        assert chunk, f"the broker closed after {len(answers)} of {count} answers"
        buf += chunk
    return answers


def _pipeline(broker, requests: list[bytes]) -> list[tuple]:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=20) as s:
        s.sendall(b"".join(requests))  # one write: the broker reads them together
        return _read_answers(s, len(requests))


def test_pipelined_acks_all_produces_are_answered_and_appended_in_order(broker_factory):
    b = broker_factory(TOPICS)
    auth = b.headers["Authorization"]
    values = [f"p{i}".encode() for i in range(12)]
    answers = _pipeline(b, [_produce(auth, batch([v, v + b"-2"])) for v in values])
    assert [a[0] for a in answers] == [200] * len(values), answers[:2]
    offsets = [json.loads(a[2])["base_offset"] for a in answers]
    assert offsets == [2 * i for i in range(len(values))]
    assert [v for _, v in fetch_all_values(b, TOPIC, 0)] == [
        x for v in values for x in (v, v + b"-2")
    ]


def test_a_failing_request_in_the_middle_gets_its_own_answer(broker_factory):
    b = broker_factory(TOPICS)
    auth = b.headers["Authorization"]
    good = [batch([f"g{i}".encode()]) for i in range(6)]
    corrupt = bytearray(batch([b"bad"]))
    corrupt[-1] ^= 1  # CRC mismatch: refused, nothing appended
    requests = [_produce(auth, bytes(g)) for g in good[:3]]
    requests.append(_produce(auth, bytes(corrupt)))
    requests.append(_produce("Bearer nokey.nosecret", good[3]))  # refused by auth
    requests += [_produce(auth, bytes(g)) for g in good[4:]]
    answers = _pipeline(b, requests)
    statuses = [a[0] for a in answers]
    assert statuses[:3] == [200] * 3 and statuses[5:] == [200, 200], statuses
    assert statuses[3] == 400 and json.loads(answers[3][2])["error_code"] == "CORRUPT_MESSAGE"
    assert statuses[4] == 401, answers[4]
    assert [json.loads(a[2])["base_offset"] for a in answers if a[0] == 200] == list(range(5))
    assert [v for _, v in fetch_all_values(b, TOPIC, 0)] == [
        b"g0",
        b"g1",
        b"g2",
        b"g4",
        b"g5",
    ]


def test_a_fetch_and_a_hand_off_in_the_pipeline_wait_their_turn(broker_factory):
    """A fetch after two produces sees both (it starts once they are answered); a request
    aiohttp serves takes the connection only after the fast front's answers, and a produce
    after it is aiohttp's."""
    b = broker_factory(TOPICS)
    auth = b.headers["Authorization"]
    answers = _pipeline(
        b,
        [
            _produce(auth, batch([b"a"])),
            _produce(auth, batch([b"b"])),
            _get(f"{PATH}?offset=0", auth),
            _produce(auth, batch([b"c"])),
            _get("/readyz", auth),
            _produce(auth, batch([b"d"])),
        ],
    )
    assert [a[0] for a in answers] == [200] * 6, answers
    fetched = [r.value for bt in decode_batches(answers[2][2]) for r in bt.records]
    assert fetched == [b"a", b"b"]
    assert [json.loads(answers[i][2])["base_offset"] for i in (0, 1, 3, 5)] == [0, 1, 2, 3]
    assert "server" not in answers[3][1] and answers[5][1].get("server") == "Sluice"


def test_a_client_closing_mid_pipeline_leaves_a_prefix_and_the_broker_serving(broker_factory):
    b = broker_factory(TOPICS)
    auth = b.headers["Authorization"]
    values = [f"c{i}".encode() for i in range(16)]
    with socket.create_connection(("127.0.0.1", b.port), timeout=20) as s:
        s.sendall(b"".join(_produce(auth, batch([v])) for v in values))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    # closed with a reset, nothing read: requests started finish, the rest are dropped
    deadline = time.monotonic() + 10
    stored: list[bytes] = []
    while time.monotonic() < deadline:
        stored = [v for _, v in fetch_all_values(b, TOPIC, 0)]
        time.sleep(0.3)
        if [v for _, v in fetch_all_values(b, TOPIC, 0)] == stored:
            break
    assert stored == values[: len(stored)]  # in order, no gap
    # the broker goes on serving, and appends after what was stored
    answers = _pipeline(b, [_produce(auth, batch([b"after"]))])
    assert answers[0][0] == 200
    assert json.loads(answers[0][2])["base_offset"] == len(stored)
