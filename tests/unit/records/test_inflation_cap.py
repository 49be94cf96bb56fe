"""Decompression bombs: every codec stops inflating at the cap, with memory to match.

Each bomb is a few KB that would inflate to 64 MiB. ``decompress`` must raise
``MessageTooLargeError`` having held little more than the cap (tracemalloc sees every bytes
object the codecs return), with an explicit cap and with the default one, which is the only
mode there is: no call inflates without a bound.
"""

from __future__ import annotations

import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from brokernodes.errors import MessageTooLargeError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.compression import (
    DEFAULT_MAX_INFLATED_BYTES,
    XERIAL_HEADER,
    Compression,
    compress,
    decompress,
    max_inflated_bytes,
)

MIB = 1024 * 1024
BOMB_BYTES = 64 * MIB  # what each bomb inflates to
CAP = 1 * MIB


def _zeros_stream(feed) -> None:
    chunk = bytes(MIB)
    for _ in range(BOMB_BYTES // MIB):
        feed(chunk)


def gzip_bomb() -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts: list[bytes] = []
    _zeros_stream(lambda c: parts.append(z.compress(c)))
    return b"".join(parts) + z.flush()


def zstd_bomb(*, content_size: bool) -> bytes:
    """Java's streaming writer declares no content size, so the decoder cannot know it."""
    if content_size:
        return zstandard.ZstdCompressor(level=19).compress(bytes(BOMB_BYTES))
    z = zstandard.ZstdCompressor(level=19).compressobj()
    parts: list[bytes] = []
    _zeros_stream(lambda c: parts.append(z.compress(c)))
    return b"".join(parts) + z.flush()


def lz4_bomb() -> bytes:
    z = lz4.frame.LZ4FrameCompressor(block_linked=False)
    parts = [z.begin()]
    _zeros_stream(lambda c: parts.append(z.compress(c)))
    return b"".join(parts) + z.flush()


def snappy_raw_bomb() -> bytes:
    """Raw snappy whose preamble declares 64 MiB (the body is a stub)."""
    n = BOMB_BYTES
    preamble = bytearray()
    while n > 0x7F:
        preamble.append((n & 0x7F) | 0x80)
        n >>= 7
    preamble.append(n)
    return bytes(preamble) + b"\x00" * 16


def snappy_xerial_bomb() -> bytes:
    block = bytes(cramjam.snappy.compress_raw(bytes(64 * 1024)))
    return XERIAL_HEADER + (len(block).to_bytes(4, "big") + block) * (BOMB_BYTES // (64 * 1024))


BOMBS = {
    "gzip": (Compression.GZIP, gzip_bomb),
    "zstd-streamed": (Compression.ZSTD, lambda: zstd_bomb(content_size=False)),
    "zstd-declared": (Compression.ZSTD, lambda: zstd_bomb(content_size=True)),
    "lz4": (Compression.LZ4, lz4_bomb),
    "snappy-raw": (Compression.SNAPPY, snappy_raw_bomb),
    "snappy-xerial": (Compression.SNAPPY, snappy_xerial_bomb),
}


@pytest.fixture(scope="module", params=sorted(BOMBS))
def bomb(request) -> tuple[str, Compression, bytes]:
    codec, make = BOMBS[request.param]
    return request.param, codec, make()


def _peak_while(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def _bound(cap: int, data: bytes) -> int:
    """Output up to the cap, held twice while joined, one codec block past it (zstd: 128 KiB),
    and the input; a bomb inflated whole would take 64 MiB."""
    return 2 * cap + 256 * 1024 + 2 * len(data)


def test_a_bomb_is_small_and_really_inflates_to_64_mib(bomb):
    name, codec, data = bomb
    if name.startswith("snappy"):
        assert len(data) < 4 * MIB  # snappy's ratio is ~21: no small bomb, but a long one
    else:
        assert len(data) < 300 * 1024, name
    if name != "snappy-raw":  # a stub body: only its declared length is a bomb
        assert len(decompress(codec, data, BOMB_BYTES)) == BOMB_BYTES


def test_a_bomb_stops_at_the_cap_with_bounded_memory(bomb):
    name, codec, data = bomb

    def inflate() -> None:
        with pytest.raises(MessageTooLargeError, match=f"more than {CAP} bytes"):
            decompress(codec, data, CAP)

    peak = _peak_while(inflate)
    assert peak < _bound(CAP, data), f"{name}: peak {peak / MIB:.1f} MiB"


def test_the_default_cap_applies_when_none_is_given(bomb):
    """``max_size`` None is not "unbounded": the default cap (16 MiB and a bit)."""
    name, codec, data = bomb
    assert DEFAULT_MAX_INFLATED_BYTES < BOMB_BYTES

    def inflate() -> None:
        with pytest.raises(MessageTooLargeError):
            decompress(codec, data)

    peak = _peak_while(inflate)
    assert peak < _bound(DEFAULT_MAX_INFLATED_BYTES, data), f"{name}: {peak / MIB:.1f} MiB"


def test_decode_batch_inflates_through_the_cap():
    """The full codec (JSON fetch, the lag refresh, the Spark source) gets the same cap."""
    ts = 1_700_000_000_000
    value = bytes(2 * MIB)
    buf = encode_batch([Record(ts, b"k", value)], compression=Compression.ZSTD)
    assert len(buf) < 4096
    with pytest.raises(MessageTooLargeError):
        decode_batch(buf, max_records_bytes=MIB)
    assert decode_batch(buf, max_records_bytes=4 * MIB).records[0].value == value


def test_legitimate_data_at_the_cap_inflates_whole():
    data = bytes(range(256)) * (CAP // 256)
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
        assert decompress(codec, compress(codec, data), CAP) == data
    z = zstandard.ZstdCompressor().compressobj()
    streamed = z.compress(data) + z.flush()
    assert decompress(Compression.ZSTD, streamed, CAP) == data
    with pytest.raises(MessageTooLargeError):
        decompress(Compression.ZSTD, streamed, CAP - 1)


def test_the_cap_is_a_multiple_of_max_message_bytes():
    assert max_inflated_bytes(1000) == 16_000
    assert max_inflated_bytes(1000, 4) == 4000
    assert max_inflated_bytes(1024 * 1024 + 12) == DEFAULT_MAX_INFLATED_BYTES
