"""Binary produce and fetch, idempotence, list offsets and long polls."""

from __future__ import annotations

import json
import socket
import threading
import time

from brokernodes.records.batch import decode_batches
from tests.integration.broker.util import (
    BINARY,
    batch,
    fetch_all_values,
    fetch_binary,
    headers_of,
    produce_binary,
    raw_request,
)


def test_binary_produce_of_several_batches_and_exact_fetch(broker):
    bodies = [batch([b"a%d" % i for i in range(n)], ts=1000 + n) for n in (1, 3, 5)]
    status, ans = produce_binary(broker, "events", 0, b"".join(bodies))
    assert status == 200, ans
    assert ans == {
        "base_offset": 0,
        "last_offset": 8,
        "log_append_time": -1,
        "log_start_offset": 0,
        "duplicate": False,
        "throttle_time_ms": 0,
        "batches": [
            {"base_offset": 0, "last_offset": 0, "duplicate": False},
            {"base_offset": 1, "last_offset": 3, "duplicate": False},
            {"base_offset": 4, "last_offset": 8, "duplicate": False},
        ],
    }
    status, ans = produce_binary(broker, "events", 0, bodies[1])
    assert (status, ans["base_offset"], ans["last_offset"]) == (200, 9, 11)

    status, headers, body = fetch_binary(broker, "events", 0, 0)
    assert status == 200
    assert headers["Content-Type"] == "application/vnd.kafka.recordbatch.v2"
    assert headers["Sluice-High-Watermark"] == "12"
    assert headers["Sluice-Log-Start-Offset"] == "0"
    assert headers["Sluice-Log-End-Offset"] == "12"
    assert headers["Sluice-Next-Offset"] == "12"
    # exactly the appended bytes, base offsets rewritten and the leader epoch (0) set
    expected = b"".join(
        batch(
            [b"a%d" % i for i in range(n)], ts=1000 + n, base_offset=base, partition_leader_epoch=0
        )
        for n, base in ((1, 0), (3, 1), (5, 4), (3, 9))
    )
    assert body == expected
    # from an offset inside a batch: whole batches from the one holding it
    status, _, body = fetch_binary(broker, "events", 0, 6)
    assert [h.base_offset for h in headers_of(body)] == [4, 9]
    # max_bytes: at least one whole batch, never a partial one; the next offset follows it
    status, headers, body = fetch_binary(broker, "events", 0, 0, max_bytes=10)
    assert [h.base_offset for h in headers_of(body)] == [0]
    assert headers["Sluice-Next-Offset"] == "1"
    two = len(bodies[1]) + len(bodies[2])
    status, headers, body = fetch_binary(broker, "events", 0, 2, max_bytes=two)
    assert [h.base_offset for h in headers_of(body)] == [1, 4]
    assert headers["Sluice-Next-Offset"] == "9"
    # at the end: empty body, the next offset is the one asked for
    status, headers, body = fetch_binary(broker, "events", 0, 12)
    assert (status, body, headers["Sluice-Next-Offset"]) == (200, b"", "12")


def test_copy_fetch_path_serves_the_same_bytes(broker_factory):
    b = broker_factory(extra_args=["--fetch-path", "copy", "--loop", "asyncio"])
    body = batch([b"x" * 1000] * 300)
    assert produce_binary(b, "events", 0, body)[0] == 200
    status, _, got = fetch_binary(b, "events", 0, 0)
    assert status == 200 and got[16:] == body[16:] and got[12:16] == b"\x00\x00\x00\x00"


def test_large_fetch_across_segments(broker):
    # "small" rolls every 4 KiB: a fetch spans several segment files
    sent = []
    for i in range(20):
        values = [b"%03d-%s" % (i, b"v" * 300) for _ in range(3)]
        sent.extend(values)
        assert produce_binary(broker, "small", 0, batch(values))[0] == 200
    assert [v for _, v in fetch_all_values(broker, "small", 0)] == sent
    _status, headers, body = fetch_binary(broker, "small", 0, 0, max_bytes=1 << 20)
    assert len(headers_of(body)) == 20
    assert headers["Sluice-Next-Offset"] == "60"
    # a fetch cut by max_bytes inside a later segment goes on where it stopped
    _status, headers, body = fetch_binary(broker, "small", 0, 7, max_bytes=5 * len(body) // 20)
    assert [h.base_offset for h in headers_of(body)] == [6, 9, 12, 15, 18]
    assert headers["Sluice-Next-Offset"] == "21"
    assert len(list(broker.data_dir.joinpath("small-0").glob("*.log"))) > 2


class _Reader:
    """Reads HTTP/1.1 answers off one socket: a head, then exactly a body's bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, "the broker closed the connection"
        self.buf += chunk

    def head(self) -> dict[str, str]:
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 200"), lines[0]
        return {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}

    def body(self, length: int) -> bytes:
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return body


def test_a_consumer_pipelines_its_fetches_with_the_next_offset_header(broker):
    """The next fetch is sent as soon as an answer's head arrives, from its
    Sluice-Next-Offset, before that answer's body is read: every record arrives once, in
    order, across segment files, and each header agrees with its body."""
    sent = []
    for i in range(30):
        values = [b"%03d-%d-%s" % (i, j, b"v" * 200) for j in range(3)]
        sent.extend(values)
        assert produce_binary(broker, "small", 0, batch(values))[0] == 200
    auth = broker.headers["Authorization"]

    def request(offset: int) -> bytes:
        return (
            f"GET /sluice/v1/topics/small/partitions/0/batches?offset={offset}&max_bytes=2000 "
            f"HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n"
        ).encode()

    got, fetches = [], 0
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        reader = _Reader(sock)
        sock.sendall(request(0))
        for _ in range(100):
            headers = reader.head()
            fetches += 1
            next_offset = int(headers["sluice-next-offset"])
            more = next_offset < int(headers["sluice-high-watermark"])
            if more:
                sock.sendall(request(next_offset))  # before this answer's body is read
            body = reader.body(int(headers["content-length"]))
            batches = decode_batches(body)
            assert batches and batches[-1].header.next_offset == next_offset
            got.extend(r.value for b in batches for r in b.records)
            if not more:
                break
    assert got == sent
    assert fetches >= 10  # 2000-byte fetches of ~700-byte batches
    assert len(list(broker.data_dir.joinpath("small-0").glob("*.log"))) > 2


def test_idempotent_retry_answers_original_offsets_without_duplicates(broker):
    status, ids = broker.json("POST", "/sluice/v1/producer-ids")
    assert status == 200 and ids["producer_epoch"] == 0 and ids["producer_id"] > 0
    pid = ids["producer_id"]
    _status2, ids2 = broker.json("POST", "/sluice/v1/producer-ids")
    assert ids2["producer_id"] != pid

    def idem(seq, values, epoch=0):
        return batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    first = idem(0, [b"a", b"b"])
    status, a1 = produce_binary(broker, "events", 0, first)
    assert status == 200 and not a1["duplicate"]
    status, a2 = produce_binary(broker, "events", 0, idem(2, [b"c"]))
    assert (status, a2["base_offset"]) == (200, 2)
    status, again = produce_binary(broker, "events", 0, first)  # a retry
    assert status == 200 and again["duplicate"] is True
    assert (again["base_offset"], again["last_offset"]) == (0, 1)
    assert [v for _, v in fetch_all_values(broker, "events", 0)] == [b"a", b"b", b"c"]

    status, gap = produce_binary(broker, "events", 0, idem(7, [b"x"]))
    assert status == 409 and gap["error_code"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    status, _bumped = produce_binary(broker, "events", 0, idem(0, [b"d"], epoch=1))
    assert status == 200
    status, fenced = produce_binary(broker, "events", 0, idem(3, [b"y"], epoch=0))
    assert status == 409 and fenced["error_code"] == "INVALID_PRODUCER_EPOCH"
    assert [v for _, v in fetch_all_values(broker, "events", 0)] == [b"a", b"b", b"c", b"d"]

    # the producer state is rebuilt from the log after a crash
    broker.restart(hard=True)
    status, again = produce_binary(broker, "events", 0, idem(0, [b"d"], epoch=1))
    assert status == 200 and again["duplicate"] and again["base_offset"] == 3
    status, ids3 = broker.json("POST", "/sluice/v1/producer-ids")
    assert ids3["producer_id"] not in (pid, ids2["producer_id"])


def test_a_retried_request_whose_first_batch_is_in_the_log_appends_the_rest(broker):
    """[b1], then [b1, b2] (the shape a new leader holding only b1 sees): b1 answers with
    its original offsets, b2 is appended and answered with its own; before, the whole
    request was answered as b1's duplicate and b2 was never stored."""
    _, ids = broker.json("POST", "/sluice/v1/producer-ids")
    pid = ids["producer_id"]
    b1 = batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    b2 = batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2)
    status, first = produce_binary(broker, "events", 0, b1)
    assert status == 200 and "batches" not in first
    status, ans = produce_binary(broker, "events", 0, b1 + b2)
    assert status == 200, ans
    assert ans["batches"] == [
        {"base_offset": 0, "last_offset": 1, "duplicate": True},
        {"base_offset": 2, "last_offset": 2, "duplicate": False},
    ]
    assert (ans["base_offset"], ans["last_offset"], ans["duplicate"]) == (0, 2, False)
    assert [v for _, v in fetch_all_values(broker, "events", 0)] == [b"a", b"b", b"c"]
    # a producer's batch already in the log after its new batch goes back in sequence
    b3 = batch([b"d"], producer_id=pid, producer_epoch=0, base_sequence=3)
    status, bad = produce_binary(broker, "events", 0, b3 + b2)
    assert status == 409 and bad["error_code"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert len(fetch_all_values(broker, "events", 0)) == 3


def test_list_offsets_earliest_latest_and_by_time(module_broker):
    b = module_broker
    base = None
    for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):
        status, ans = produce_binary(b, "orders", 1, batch([b"t%d" % i, b"u%d" % i], ts=ts))
        assert status == 200
        base = ans["base_offset"] if base is None else base
    path = "/sluice/v1/topics/orders/partitions/1/offsets"
    assert b.json("GET", path + "?timestamp=earliest")[1] == {"offset": 0, "timestamp": -1}
    status, latest = b.json("GET", path + "?timestamp=latest")
    assert status == 200 and latest["offset"] == base + 6
    assert b.json("GET", path)[1]["offset"] == base + 6  # default: latest
    assert b.json("GET", path + "?timestamp=1500000")[1] == {
        "offset": base + 2,
        "timestamp": 2_000_000,
    }
    assert b.json("GET", path + "?timestamp=3000000")[1]["offset"] == base + 4
    status, none = b.json("GET", path + "?timestamp=9999999999999")
    assert none["offset"] == base + 6  # no batch that late: the end
    status, bad = b.json("GET", path + "?timestamp=soon")
    assert status == 400 and bad["error_code"] == "INVALID_REQUEST"


def test_long_poll_wakes_when_a_record_arrives(module_broker):
    b = module_broker
    end = b.json("GET", "/sluice/v1/topics/orders/partitions/2/offsets?timestamp=latest")[1]
    offset = end["offset"]
    result = {}

    def poll():
        started = time.monotonic()
        result["resp"] = fetch_binary(b, "orders", 2, offset, max_wait_ms=10000)
        result["took"] = time.monotonic() - started

    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    assert produce_binary(b, "orders", 2, batch([b"wake"]))[0] == 200
    t.join(10)
    assert not t.is_alive()
    status, _, body = result["resp"]
    assert status == 200
    assert [r.value for bb in decode_batches(body) for r in bb.records] == [b"wake"]
    assert 0.25 < result["took"] < 5


def test_long_poll_times_out_empty(module_broker):
    b = module_broker
    end = b.json("GET", "/sluice/v1/topics/orders/partitions/0/offsets?timestamp=latest")[1]
    started = time.monotonic()
    status, _headers, body = fetch_binary(b, "orders", 0, end["offset"], max_wait_ms=400)
    took = time.monotonic() - started
    assert (status, body) == (200, b"")
    assert 0.35 < took < 3
    started = time.monotonic()
    status, got = b.json(
        "GET",
        f"/sluice/v1/topics/orders/partitions/0/records?offset={end['offset']}&max_wait_ms=300",
    )
    assert status == 200 and got["records"] == [] and got["next_offset"] == end["offset"]
    assert time.monotonic() - started > 0.25


def test_long_poll_min_bytes_waits_for_enough(module_broker):
    b = module_broker
    end = b.json("GET", "/sluice/v1/topics/events/partitions/0/offsets")[1]["offset"]
    result = {}

    def poll():
        result["resp"] = fetch_binary(b, "events", 0, end, max_wait_ms=5000, min_bytes=3000)

    t = threading.Thread(target=poll)
    t.start()
    assert produce_binary(b, "events", 0, batch([b"s" * 100]))[0] == 200
    time.sleep(0.3)
    assert t.is_alive()  # 100 bytes are not enough
    assert produce_binary(b, "events", 0, batch([b"L" * 4000]))[0] == 200
    t.join(5)
    assert not t.is_alive()
    assert len(headers_of(result["resp"][2])) == 2


def _responses(data: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each HTTP/1.1 response in ``data``, in order (Content-Length)."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        fields = dict(h.partition(b":")[::2] for h in lines[1:])
        length = int({k.strip().lower(): v for k, v in fields.items()}[b"content-length"])
        out.append((int(lines[0].split(b" ")[1]), rest[:length]))
        data = rest[length:]
    return out


def test_pipelined_requests_on_one_connection_are_answered_in_order(broker):
    """HTTP/1.1 pipelining (the prebuilt produce benchmark sends several requests in one
    write): every request is answered, in order, an error in the middle included."""
    auth = broker.headers["Authorization"]
    bodies = [batch([b"p%d-a" % i, b"p%d-b" % i]) for i in range(3)]

    def post(path: str, body: bytes, last: bool = False) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
            f"Content-Type: {BINARY}\r\nContent-Length: {len(body)}\r\n"
            + ("Connection: close\r\n" if last else "")
            + "\r\n"
        ).encode() + body

    good = "/sluice/v1/topics/events/partitions/0/batches?acks=1"
    requests = [
        post(good, bodies[0]),
        post("/sluice/v1/topics/events/partitions/7/batches", bodies[1]),  # no partition 7
        post(good, bodies[1]),
        f"GET /sluice/v1/topics/events/partitions/0/batches?offset=0 HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: {auth}\r\n\r\n".encode(),
        post(good, bodies[2], last=True),
    ]
    answers = _responses(raw_request(broker.port, b"".join(requests)))
    assert [status for status, _ in answers] == [200, 404, 200, 200, 200]
    first, missing, second, fetched, third = (body for _, body in answers)
    assert json.loads(missing)["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    produced = [json.loads(b) for b in (first, second, third)]
    assert [(a["base_offset"], a["last_offset"]) for a in produced] == [(0, 1), (2, 3), (4, 5)]
    # the fetch, sent before the third produce, sees exactly the first two batches
    values = [r.value for b in decode_batches(fetched) for r in b.records]
    assert values == [b"p0-a", b"p0-b", b"p1-a", b"p1-b"]
