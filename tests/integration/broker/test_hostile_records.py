"""Hostile batches against a real broker: decompression bombs, garbage records behind a valid
CRC, timestamps at the int64 limits. Each is refused with its stable code and nothing is
stored; a bomb already in a log (written under a looser limit) answers a clear error on the
JSON fetch and the WebSocket consume, and the lag refresh keeps working; the broker's peak
memory stays bounded and other clients are served promptly meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
import time
import zlib
from pathlib import Path

import pytest
import zstandard
from crc32c import crc32c

from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import ATTRIBUTES_AT, CRC_AT, HEADER_SIZE
from brokernodes.records.varint import encode_varint
from tests.integration.broker.test_ws import connect, recv_error_then_close, run
from tests.integration.broker.util import batch, fetch_binary, fetch_json, produce_binary
from tests.integration.conftest import DEFAULT_TOPICS

MIB = 1024 * 1024
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# --- batches ---------------------------------------------------------------------------


def recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[ATTRIBUTES_AT:])))
    return bytes(buf)


def around(section: bytes, codec: int = 0, *, ts: int | None = None) -> bytes:
    """A one-record batch header (key b"k", timestamp ``ts``) around ``section``."""
    ts = int(time.time() * 1000) if ts is None else ts
    buf = bytearray(encode_batch([Record(ts, b"k", b"v")])[:HEADER_SIZE]) + section
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, ATTRIBUTES_AT, codec)
    return recrc(buf)


def bomb(codec: int, inflated: int) -> bytes:
    """One keyed record whose value is ``inflated`` zero bytes, compressed as a stream (the
    test never holds the inflated bytes): a valid batch a few KB long."""
    prefix = b"\x00\x00\x00" + encode_varint(1) + b"k" + encode_varint(inflated)
    head = encode_varint(len(prefix) + inflated + 1) + prefix
    if codec == Compression.ZSTD:
        z = zstandard.ZstdCompressor(level=19).compressobj()  # no content size, as Java
        write, flush = z.compress, z.flush
    else:
        g = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        write, flush = g.compress, g.flush
    parts = [write(head)]
    zeros = bytes(MIB)
    for _ in range(inflated // MIB):
        parts.append(write(zeros))
    parts += [write(b"\x00"), flush()]
    return around(b"".join(parts), codec)


# --- the broker process ----------------------------------------------------------------


def peak_rss_reset(pid: int) -> None:
    """Reset the process's peak resident size (VmHWM) to its current size."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Bystander(threading.Thread):
    """Another client producing and fetching on its own topic; records each round trip."""

    def __init__(self, broker, topic: str = "events") -> None:
        super().__init__(daemon=True)
        self.broker = broker
        self.topic = topic
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.failures: list[object] = []

    def run(self) -> None:
        deadline = time.monotonic() + 60  # bounded even if the test forgets to stop it
        while not self.stop.is_set() and time.monotonic() < deadline:
            started = time.monotonic()
            status, ans = produce_binary(self.broker, self.topic, 0, batch([b"bystander"]))
            if status != 200:
                self.failures.append(ans)
            else:
                status, _, _ = fetch_binary(self.broker, self.topic, 0, ans["base_offset"])
                if status != 200:
                    self.failures.append(status)
            self.latencies.append(time.monotonic() - started)
            time.sleep(0.02)

    def finish(self) -> tuple[list[float], list[object]]:
        self.stop.set()
        self.join(10)
        return self.latencies, self.failures


def high_watermark(broker, topic: str) -> int:
    status, headers, _ = fetch_binary(broker, topic, 0, 0)
    assert status == 200
    return int(headers["Sluice-High-Watermark"])


# --- tests -----------------------------------------------------------------------------


def test_bombs_to_a_compacted_topic_are_refused_and_nobody_stalls(broker):
    b = broker
    bombs = [bomb(Compression.ZSTD, 256 * MIB), bomb(Compression.GZIP, 64 * MIB)]
    assert len(bombs[0]) < 20 * 1024  # a few KB claiming 256 MiB
    peak_rss_reset(b.pid)
    before = rss(b.pid)
    bystander = Bystander(b)
    bystander.start()
    time.sleep(0.3)
    for _ in range(3):
        for body in bombs:
            started = time.monotonic()
            status, err = produce_binary(b, "compacted", 0, body)
            assert status == 413, err
            assert err["error_code"] == "MESSAGE_TOO_LARGE"
            assert "inflates to more than" in err["message"]
            assert "max.inflation.ratio" in err["message"]
            assert time.monotonic() - started < 5.0
    time.sleep(0.3)
    latencies, failures = bystander.finish()
    assert not failures
    assert len(latencies) >= 5
    assert max(latencies) < 1.5, sorted(latencies)[-5:]
    # nothing stored, and the broker's memory never rose by a bomb's size
    assert high_watermark(b, "compacted") == 0
    grown = peak_rss(b.pid) - before
    assert grown < 120 * MIB, f"peak RSS rose {grown / MIB:.0f} MiB"
    # a fair compressed batch to the compacted topic still goes in
    fair = encode_batch([Record(int(time.time() * 1000), b"k", b"v")], compression=4)
    assert produce_binary(b, "compacted", 0, fair)[0] == 200


def test_garbage_records_behind_a_valid_crc_are_refused_and_not_stored(module_broker):
    b = module_broker
    end = high_watermark(b, "events")
    good = encode_batch([Record(int(time.time() * 1000), b"k", b"value")])
    section = good[HEADER_SIZE:]
    count_two = bytearray(good)
    struct.pack_into(">i", count_two, 23, 1)  # lastOffsetDelta 1 ...
    struct.pack_into(">i", count_two, 57, 2)  # ... and a record count of 2 for one record
    cases = {
        "a record count of 2 for 1 record": recrc(count_two),
        "a record length past the batch": around(encode_varint(900) + section[1:]),
        "a varint that never ends": around(b"\xff" * 16),
        "random bytes": around(bytes(range(3, 90))),
        "garbage inside a gzip batch": around(zlib.compress(b"\x07" * 50, wbits=31), 1),
    }
    for name, body in cases.items():
        status, err = produce_binary(b, "events", 0, body)
        assert status == 400, (name, err)
        assert err["error_code"] == "CORRUPT_MESSAGE", (name, err)
        assert "nothing was appended" in err["message"], name
    control = encode_batch([Record(int(time.time() * 1000), bytes(4), bytes(6))], is_control=True)
    status, err = produce_binary(b, "events", 0, control)
    assert (status, err.get("error_code")) == (400, "INVALID_RECORD"), err
    assert high_watermark(b, "events") == end
    assert produce_binary(b, "events", 0, good)[0] == 200


@pytest.mark.parametrize("ts", [INT64_MAX, INT64_MIN, 2**62, "an hour and a minute ahead"])
def test_timestamps_out_of_bounds_are_invalid_timestamp(module_broker, ts):
    b = module_broker
    if isinstance(ts, str):
        ts = int(time.time() * 1000) + 3_660_000
    end = high_watermark(b, "events")
    buf = bytearray(encode_batch([Record(int(time.time() * 1000), b"k", b"v")]))
    struct.pack_into(">qq", buf, 27, ts, ts)  # base and max timestamp: the record reads ts
    status, err = produce_binary(b, "events", 0, recrc(buf))
    assert status == 400, err
    assert err["error_code"] == "INVALID_TIMESTAMP"
    assert "message.timestamp." in err["message"]
    # the same through the JSON produce path (an explicit timestamp)
    if ts >= 0:
        status, err = b.json(
            "POST",
            "/v3/clusters/test-cluster/topics/events/records",
            {"value": {"type": "STRING", "data": "x"}, "timestamp": ts},
        )
        assert err.get("sluice_code") == "INVALID_TIMESTAMP", err
    assert high_watermark(b, "events") == end


def test_topic_timestamp_bounds_are_honoured(broker_factory):
    b = broker_factory(
        {
            "strict": (
                1,
                {
                    "message.timestamp.before.max.ms": "60000",
                    "message.timestamp.after.max.ms": "1000",
                },
            )
        }
    )
    now = int(time.time() * 1000)
    status, err = produce_binary(b, "strict", 0, batch([b"old"], ts=now - 120_000))
    assert (status, err.get("error_code")) == (400, "INVALID_TIMESTAMP"), err
    assert "message.timestamp.before.max.ms=60000" in err["message"]
    status, err = produce_binary(b, "strict", 0, batch([b"ahead"], ts=now + 30_000))
    assert (status, err.get("error_code")) == (400, "INVALID_TIMESTAMP"), err
    assert produce_binary(b, "strict", 0, batch([b"now"]))[0] == 200


def test_a_bomb_already_in_the_log_gets_a_clear_error_on_every_read(broker_factory):
    """Written while the broker allowed more inflation; read back under the default."""
    topics = {
        **DEFAULT_TOPICS,
        "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
        "bombed": (1, {}),
    }
    b = broker_factory(topics, env={"SLUICE_MAX_INFLATION_RATIO": "200"})
    assert produce_binary(b, "bombed", 0, batch([b"before"]))[0] == 200
    status, ans = produce_binary(b, "bombed", 0, bomb(Compression.ZSTD, 96 * MIB))
    assert status == 200, ans
    bomb_offset = ans["base_offset"]
    assert produce_binary(b, "bombed", 0, batch([b"after"]))[0] == 200
    b.env.pop("SLUICE_MAX_INFLATION_RATIO")
    b.restart()

    peak_rss_reset(b.pid)
    before = rss(b.pid)
    # JSON fetch: the record before the bomb, then the bomb's error naming how to skip it
    status, ans = fetch_json(b, "bombed", 0, 0)
    assert status == 200, ans
    assert [r["value"] for r in ans["records"]] == ["before"]
    assert ans["next_offset"] == bomb_offset
    status, err = fetch_json(b, "bombed", 0, bomb_offset)
    assert status == 413, err
    assert err["error_code"] == "MESSAGE_TOO_LARGE"
    assert f"offset={bomb_offset + 1}" in err["message"]
    status, ans = fetch_json(b, "bombed", 0, bomb_offset + 1)
    assert [r["value"] for r in ans["records"]] == ["after"]

    # WebSocket consume (JSON frames): an error frame naming the code, then the close
    async def consume() -> tuple[dict, int | None]:
        path = f"/sluice/v1/ws/consume?topic=bombed&offset={bomb_offset}"
        async with connect(b, path) as ws:
            await ws.send_str(json.dumps({"credit": 64 * MIB}))
            error, code, _ = await recv_error_then_close(ws)
            return error, code

    error, code = run(consume())
    assert error["error_code"] == "MESSAGE_TOO_LARGE", error
    assert code is not None and code >= 4000

    # the lag of a group committed at the bomb: answered, promptly, again and again
    status, _, _ = b.request(
        "POST",
        "/sluice/v1/groups/laggards/offsets",
        {"offsets": [{"topic": "bombed", "partition": 0, "offset": bomb_offset}]},
    )
    assert status == 200
    for _ in range(3):
        started = time.monotonic()
        status, d = b.json("GET", "/sluice/v1/groups/laggards")
        assert status == 200, d
        (row,) = [r for r in d["offsets"] if r["topic"] == "bombed"]
        assert row["lag"] == 2 and row["time_lag_ms"] >= 0
        assert time.monotonic() - started < 2.0
    asyncio.run(asyncio.sleep(2.5))  # a background lag refresh or two runs meanwhile
    grown = peak_rss(b.pid) - before
    assert grown < 100 * MIB, f"peak RSS rose {grown / MIB:.0f} MiB"
    assert b.request("GET", "/readyz", auth=False)[0] == 200
