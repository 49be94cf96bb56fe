"""Codecs: round trips, the exact framing Kafka clients write, refusal of bad payloads."""

from __future__ import annotations

import gzip
import struct
import types
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    UnsupportedCompressionError,
)
from brokernodes.records.compression import (
    XERIAL_HEADER,
    Compression,
    codec_of,
    compress,
    decompress,
    snappy_xerial_compress,
)

from .kafka_python import kafka_codec, snappy_shim

DATA = b"".join(b"record %d with some repetitive payload; " % i for i in range(3000))
COMPRESSED = [c for c in Compression if c is not Compression.NONE]


def test_codec_ids_are_kafkas():
    assert [(c.name, int(c)) for c in Compression] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("data", [b"", b"x", DATA], ids=["empty", "one-byte", "large"])
def test_round_trip(codec, data):
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    if codec is not Compression.NONE and data is DATA:
        assert len(packed) < len(data) // 4


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(Compression)), st.binary(max_size=5000), st.none() | st.integers(1, 9))
def test_round_trip_random(codec, data, level):
    assert decompress(codec, compress(codec, data, level)) == data


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1])
def test_unknown_codec_is_refused(codec_id):
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec_id}"):
        compress(codec_id, b"data")
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec_id}"):
        decompress(codec_id, b"data")
    with pytest.raises(UnsupportedCompressionError):
        codec_of(codec_id)


# --- formats ------------------------------------------------------------------------------


def test_gzip_output_is_deterministic_and_standard():
    packed = compress(Compression.GZIP, DATA)
    assert packed == compress(Compression.GZIP, DATA)
    assert packed[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # mtime 0, OS unknown
    assert gzip.decompress(packed) == DATA


def test_gzip_reads_several_members():
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_snappy_writes_xerial_framing():
    packed = compress(Compression.SNAPPY, DATA)
    assert packed[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01" == XERIAL_HEADER
    pos, blocks, out = 16, 0, b""
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))
        pos += 4 + length
        blocks += 1
    assert out == DATA
    assert blocks == -(-len(DATA) // (32 * 1024))


def test_snappy_reads_raw_and_xerial_with_other_version_words():
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(Compression.SNAPPY, raw) == DATA
    # Some writers (e.g. Redpanda) put little-endian version/compat words in the header.
    framed = snappy_xerial_compress(DATA)
    odd = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(Compression.SNAPPY, odd) == DATA


def test_lz4_writes_independent_blocks():
    packed = compress(Compression.LZ4, DATA)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flags = packed[4]
    assert flags & 0x20, "block independence flag must be set: Kafka rejects linked blocks"


def test_lz4_and_zstd_read_several_frames():
    two = lz4.frame.compress(b"ab") + lz4.frame.compress(b"cd")
    assert decompress(Compression.LZ4, two) == b"abcd"
    zstd = zstandard.ZstdCompressor()
    assert decompress(Compression.ZSTD, zstd.compress(b"ab") + zstd.compress(b"cd")) == b"abcd"


def test_zstd_reads_frames_without_content_size():
    """Java's zstd-jni streaming writer leaves the content size out of the frame header."""
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    assert zstandard.frame_content_size(packed) == -1
    assert decompress(Compression.ZSTD, packed) == DATA


# --- kafka-python's codecs ------------------------------------------------------------------


@pytest.fixture
def kafka_snappy(monkeypatch):
    monkeypatch.setattr(kafka_codec, "snappy", snappy_shim)


def test_kafka_python_reads_ours(kafka_snappy):
    assert kafka_codec.gzip_decode(compress(Compression.GZIP, DATA)) == DATA
    assert kafka_codec.snappy_decode(compress(Compression.SNAPPY, DATA)) == DATA
    assert kafka_codec.lz4_decode(compress(Compression.LZ4, DATA)) == DATA
    assert kafka_codec.zstd_decode(compress(Compression.ZSTD, DATA)) == DATA


def test_we_read_kafka_pythons(kafka_snappy):
    assert decompress(Compression.GZIP, kafka_codec.gzip_encode(DATA)) == DATA
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(DATA)) == DATA
    raw = kafka_codec.snappy_encode(DATA, xerial_compatible=False)
    assert decompress(Compression.SNAPPY, raw) == DATA
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode(DATA)) == DATA
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(DATA)) == DATA


def test_byte_identical_to_kafka_python_with_matching_settings(kafka_snappy, monkeypatch):
    """lz4 and zstd match at our defaults; gzip at level 9 (kafka-python's) once its mtime is
    pinned; snappy framing matches given the same raw snappy compressor."""
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: 0))
    assert compress(Compression.GZIP, DATA, level=9) == kafka_codec.gzip_encode(DATA)
    assert compress(Compression.SNAPPY, DATA) == kafka_codec.snappy_encode(DATA)
    assert compress(Compression.LZ4, DATA) == kafka_codec.lz4_encode(DATA)
    assert compress(Compression.ZSTD, DATA) == kafka_codec.zstd_encode(DATA)


# --- bad payloads ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptRecordError, match=f"{codec.name.lower()}"):
        decompress(codec, b"this is not compressed at all, not even a little")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_payload_is_corrupt(codec):
    packed = compress(codec, DATA)
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed[: len(packed) - 7])


@pytest.mark.parametrize("codec", COMPRESSED)
def test_flipped_byte_is_corrupt_or_differs(codec):
    packed = bytearray(compress(codec, DATA))
    packed[len(packed) // 2] ^= 0xFF
    try:
        out = decompress(codec, bytes(packed))
    except CorruptRecordError:
        return
    assert out != DATA  # snappy and lz4 carry no checksum here; the batch CRC catches it


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_empty_payload_is_corrupt(codec):
    with pytest.raises(CorruptRecordError, match="empty"):
        decompress(codec, b"")


def test_xerial_block_length_past_end_is_corrupt():
    packed = XERIAL_HEADER + struct.pack(">i", 1000) + b"short"
    with pytest.raises(CorruptRecordError, match="declares 1000 bytes"):
        decompress(Compression.SNAPPY, packed)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(Compression.SNAPPY, XERIAL_HEADER + b"\x00\x00")


@pytest.mark.parametrize("codec", list(Compression))
def test_max_size_refuses_oversized_output(codec):
    packed = compress(codec, DATA)
    assert decompress(codec, packed, max_size=len(DATA)) == DATA
    with pytest.raises(MessageTooLargeError, match=f"more than {len(DATA) - 1} bytes"):
        decompress(codec, packed, max_size=len(DATA) - 1)


def test_max_size_stops_a_decompression_bomb_early():
    bomb = compress(Compression.GZIP, bytes(50_000_000))
    assert len(bomb) < 100_000
    with pytest.raises(MessageTooLargeError):
        decompress(Compression.GZIP, bomb, max_size=1_000_000)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_threads_can_compress_at_once(codec):
    inputs = [DATA[i:] for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        packed = list(pool.map(lambda d: compress(codec, d), inputs * 4))
        out = list(pool.map(lambda p: decompress(codec, p), packed))
    assert out == inputs * 4
