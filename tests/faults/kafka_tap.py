"""A ``LinkProxy`` in front of a broker's Kafka listener that also reads the requests
passing through it: every record batch of every Produce request is counted by (topic,
partition, producer id, producer epoch, base sequence). A batch seen more than once is a
retry of the same batch (librdkafka re-sends a batch with its sequence after a lost answer
or a failover), so a scenario can show its idempotent deduplication was exercised, not
merely never needed.

The requests are parsed with Sluice's own framing and codec (frames.py); that is only
observation: what the broker answers is checked by the clients and the history."""

from __future__ import annotations

import struct
from collections import Counter

from brokernodes.records.header import iter_batches
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.frames import decode_request, parse_request_header
from tests.faults.proxy import LinkProxy

_SIZE = struct.Struct(">i")
BatchKey = tuple[str, int, int, int, int]  # topic, partition, producer id, epoch, sequence


class _Frames:
    """Cuts one connection's request stream into frames and hands each to ``seen``."""

    def __init__(self, seen) -> None:
        self.buf = bytearray()
        self.seen = seen

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while len(self.buf) >= 4:
            (size,) = _SIZE.unpack_from(self.buf, 0)
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            self.seen(frame)


class _TappedReader:
    """A stream reader whose every chunk is also fed to a ``_Frames``."""

    def __init__(self, reader, frames: _Frames) -> None:
        self.reader = reader
        self.frames = frames

    async def read(self, n: int) -> bytes:
        chunk = await self.reader.read(n)
        if chunk:
            self.frames.feed(chunk)
        return chunk


class ProduceTap(LinkProxy):
    def __init__(self, upstream_port: int, *, seed: int = 7) -> None:
        super().__init__(upstream_port, seed=seed)
        self.batches: Counter[BatchKey] = Counter()
        self.unparsed = 0  # frames the tap could not read (counted, not fatal)

    async def _pump(self, src, dst, *, answers: bool) -> None:
        if not answers:
            src = _TappedReader(src, _Frames(self._request))
        await super()._pump(src, dst, answers=answers)

    def _request(self, frame: bytes) -> None:
        try:
            header = parse_request_header(frame)
            if header.api_key != apis.PRODUCE or not header.supported:
                return
            request = decode_request(header, frame)
            for topic in request["topic_data"]:
                for part in topic["partition_data"]:
                    records = part["records"]
                    if records is None:
                        continue
                    for b in iter_batches(records, verify_crc=False):
                        if b.producer_id < 0:
                            continue
                        key = (
                            topic["name"],
                            part["index"],
                            b.producer_id,
                            b.producer_epoch,
                            b.base_sequence,
                        )
                        self.batches[key] += 1
        except Exception:  # observation only: a frame it cannot read is counted
            self.unparsed += 1


def resent_batches(taps, topic: str) -> int:
    """How many times batches of ``topic`` reached a broker again (same producer id,
    epoch, partition and base sequence), over every tap (a retry to a new leader goes
    through another broker's tap)."""
    total: Counter[BatchKey] = Counter()
    for tap in taps:
        total.update(tap.batches)
    return sum(n - 1 for key, n in total.items() if key[0] == topic and n > 1)


__all__ = ["ProduceTap", "resent_batches"]
