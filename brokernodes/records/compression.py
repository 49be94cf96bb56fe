"""The five compression codecs a RecordBatch v2 may name in attributes bits 0-2.

Only the records section of a batch is compressed; header and CRC stay plain. Formats are
those Kafka's Java client writes:

- gzip: an RFC 1952 stream (zlib); written with mtime 0 so output is deterministic.
- snappy: xerial snappy-java's block framing (16-byte header, then big-endian length +
  raw snappy block per 32 KiB of input), as Java's client and kafka-python write it. Raw,
  unframed snappy is read too, because some clients send it.
- lz4: the LZ4 frame format with independent 64 KiB blocks (Kafka rejects linked blocks).
- zstd: one or more zstd frames; frames without a content size (Java's streaming writer)
  are read as well.

Every decompression failure becomes ``CorruptRecordError``; an unknown codec id becomes
``UnsupportedCompressionError``.
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

from brokernodes.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    UnsupportedCompressionError,
)


class Compression(enum.IntEnum):
    """Codec ids as stored in the batch attributes (Kafka's ``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_LEVELS = {Compression.GZIP: 6, Compression.LZ4: 0, Compression.ZSTD: 3}
"""Kafka's defaults for gzip (zlib's 6) and zstd (3); lz4 fast mode as kafka-python uses."""

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_XERIAL_MAGIC = XERIAL_HEADER[:8]  # version and compat words vary between writers
_BLOCK_LENGTH = struct.Struct(">i")
_GZIP_TRAILER = struct.Struct("<II")  # CRC-32 and size mod 2**32 of the uncompressed data

INFLATION_RATIO = 16
"""Default of the broker setting ``max.inflation.ratio``: a batch's records section may
inflate to at most this many times its topic's max.message.bytes."""
INFLATION_RATIO_NAME = "max.inflation.ratio"
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # Kafka's max.message.bytes default
DEFAULT_MAX_INFLATED_BYTES = INFLATION_RATIO * DEFAULT_MAX_MESSAGE_BYTES
"""The cap where no topic config is at hand (clients, the Spark source): 16 MiB and a bit."""
_ZSTD_MAX_RATIO = 32 * 1024  # an RLE block: 4 input bytes -> 128 KiB of output
_ZSTD_MIN_STEP = 64  # input bytes per call at least, so a full limit still makes progress


class _ZstdContexts(threading.local):
    """zstd contexts are costly to create and unsafe to share across threads: one set each."""

    def __init__(self) -> None:
        self.compressors: dict[int, zstandard.ZstdCompressor] = {}
        self.decompressor = zstandard.ZstdDecompressor()


_zstd = _ZstdContexts()


def codec_of(codec_id: int) -> Compression:
    """The ``Compression`` for an attributes codec id, or ``UnsupportedCompressionError``."""
    try:
        return Compression(codec_id)
    except ValueError:
        raise UnsupportedCompressionError(
            f"compression codec id {codec_id} is not one of none(0), gzip(1), snappy(2), "
            f"lz4(3), zstd(4)"
        ) from None


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` None means the codec's default."""
    codec = codec_of(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec, 0)
    if codec is Compression.GZIP:
        return gzip_compress(data, level)
    if codec is Compression.SNAPPY:
        return snappy_xerial_compress(data)
    if codec is Compression.LZ4:
        return lz4.frame.compress(data, compression_level=level, block_linked=False)
    compressor = _zstd.compressors.get(level)
    if compressor is None:
        compressor = _zstd.compressors[level] = zstandard.ZstdCompressor(level=level)
    return compressor.compress(data)


def max_inflated_bytes(max_message_bytes: int, ratio: int = INFLATION_RATIO) -> int:
    """The most a batch's records section may inflate to: ``ratio`` x max.message.bytes."""
    return max(1, ratio) * max_message_bytes


def decompress(codec: int, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Decompress a records section, streaming, refusing output over ``max_size`` bytes.

    Every inflation of a batch goes through here. Output never grows past ``max_size`` plus
    one codec block (at most 128 KiB for zstd) before ``MessageTooLargeError`` is raised, so
    a small compressed batch cannot claim memory or CPU out of proportion (a decompression
    bomb). ``None`` means ``DEFAULT_MAX_INFLATED_BYTES``; there is no unbounded mode.
    """
    codec = codec_of(codec)
    if max_size is None:
        max_size = DEFAULT_MAX_INFLATED_BYTES
    if codec is Compression.NONE:
        out = bytes(data)
    else:
        try:
            if codec is Compression.GZIP:
                out = _gunzip(data, max_size)
            elif codec is Compression.SNAPPY:
                out = snappy_decompress(data, max_size)
            elif codec is Compression.LZ4:
                out = _lz4_decompress(data, max_size)
            else:
                out = _zstd_decompress(data, max_size)
        except (CorruptRecordError, MessageTooLargeError):
            raise
        except Exception as exc:  # each library raises its own error types
            raise CorruptRecordError(
                f"{codec.name.lower()} payload does not decompress: {exc}"
            ) from exc
    if len(out) > max_size:
        raise _too_large(codec, max_size)
    return out


def _too_large(codec: Compression, max_size: int) -> MessageTooLargeError:
    return MessageTooLargeError(
        f"{codec.name.lower()} records section inflates to more than {max_size} bytes "
        f"(the broker's limit: {INFLATION_RATIO_NAME} x max.message.bytes); split the "
        f"batch or raise max.message.bytes"
    )


def gzip_compress(data: bytes, level: int) -> bytes:
    """One gzip member with mtime 0 and OS byte 255 (unknown), as Java 16+ and Python's
    ``GzipFile`` write it, so the output depends on the data and level only."""
    extra_flags = 2 if level == 9 else 4 if level == 1 else 0  # RFC 1952 XFL, as CPython sets it
    return b"".join(
        (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00",
            bytes((extra_flags, 255)),
            zlib.compress(data, level, wbits=-zlib.MAX_WBITS),
            _GZIP_TRAILER.pack(zlib.crc32(data), len(data) & 0xFFFFFFFF),
        )
    )


def _gunzip(data: bytes | memoryview, max_size: int) -> bytes:
    """Every gzip member in ``data``, concatenated (RFC 1952 allows several); zlib stops
    after ``max_size + 1`` bytes of output, so a bomb costs no more than that."""
    out = []
    total = 0
    rest = bytes(data)
    while rest:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        chunk = inflater.decompress(rest, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(Compression.GZIP, max_size)
        if not inflater.eof:
            raise CorruptRecordError("gzip payload is truncated: the stream ends mid-member")
        out.append(chunk)
        rest = inflater.unused_data
    if not out:
        raise CorruptRecordError("gzip payload is empty")
    return b"".join(out)


def _lz4_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    """Every LZ4 frame in ``data``, concatenated; output stops after ``max_size + 1`` bytes."""
    out = []
    total = 0
    rest = bytes(data)
    while rest:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(rest, max_length=max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(Compression.LZ4, max_size)
        if not decompressor.eof:
            raise CorruptRecordError("lz4 payload is truncated: the frame is incomplete")
        out.append(chunk)
        rest = decompressor.unused_data
    if not out:
        raise CorruptRecordError("lz4 payload is empty")
    return b"".join(out)


def _zstd_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    """Every zstd frame in ``data``, concatenated, with or without a declared content size.

    A declared size over the limit is refused before any work, and a frame that declares one
    is inflated in one call (zstd refuses output past the declared size). A frame without
    one is fed in slices small enough that one slice cannot inflate past what the limit has
    left (a zstd byte yields at most ``_ZSTD_MAX_RATIO`` bytes), so output stays bounded.
    """
    out: list[bytes] = []
    append = out.append
    total = 0
    view = memoryview(data)
    pos = 0
    end = len(view)
    while pos < end:
        declared = zstandard.frame_content_size(view[pos:])
        if declared > max_size - total:
            raise _too_large(Compression.ZSTD, max_size)
        decompressor = _zstd.decompressor.decompressobj()
        while not decompressor.eof:
            if pos >= end:
                raise CorruptRecordError("zstd payload is truncated: the frame is incomplete")
            if declared >= 0:  # the declared size binds the decoder
                step = end - pos
            else:
                step = max(_ZSTD_MIN_STEP, (max_size - total) // _ZSTD_MAX_RATIO)
            chunk = decompressor.decompress(view[pos : pos + step])
            pos = min(pos + step, end)
            total += len(chunk)
            if total > max_size:
                raise _too_large(Compression.ZSTD, max_size)
            append(chunk)
        pos -= len(decompressor.unused_data)
    if not out:
        raise CorruptRecordError("zstd payload is empty")
    return b"".join(out)


def snappy_xerial_compress(data: bytes, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """snappy-java's framing: header, then (int32 length, raw snappy block) per input block."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + block_size]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_decompress(data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Read xerial-framed snappy, or raw snappy when the xerial magic is absent."""
    view = memoryview(data)
    if len(view) < len(XERIAL_HEADER) or view[:8] != _XERIAL_MAGIC:
        _check_snappy_length(view, max_size, 0)
        return bytes(cramjam.snappy.decompress_raw(view))
    out = []
    total = 0
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"xerial snappy block length at byte {pos} is truncated")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(
                f"xerial snappy block at byte {pos} declares {length} bytes but {end - pos} remain"
            )
        block = view[pos : pos + length]
        total += _check_snappy_length(block, max_size, total)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += length
    return b"".join(out)


def _check_snappy_length(block: memoryview, max_size: int | None, so_far: int) -> int:
    """The uncompressed length a raw snappy block declares; refuse it if over ``max_size``."""
    declared = cramjam.snappy.decompress_raw_len(block)
    if max_size is not None and so_far + declared > max_size:
        raise _too_large(Compression.SNAPPY, max_size)
    return declared
