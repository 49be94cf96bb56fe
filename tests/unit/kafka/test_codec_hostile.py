"""Hostile bytes: truncated messages, negative and huge lengths and counts, bad UTF-8 and bad
varints all raise ``ProtocolError`` at once (never a hang, a ``MemoryError`` or another
exception), and a bounded fuzz of whole request frames through ``parse_request_header`` and
``decode_request``, as the connection calls them."""

from __future__ import annotations

import contextlib
import random
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokernodes.server.protocol.kafka import apis, codec
from brokernodes.server.protocol.kafka.codec import ProtocolError
from brokernodes.server.protocol.kafka.frames import decode_request, parse_request_header
from tests.unit.kafka.codec_values import every_message_version, message_value

REQUESTS = [(s, v) for s, v in every_message_version() if s.kind == "request"]


def _frame(api_key: int, version: int, body: bytes, client_id: bytes = b"\x00\x01c") -> bytes:
    """A request frame without its size prefix (what the connection hands the codec)."""
    header = struct.pack(">hhi", api_key, version, 7) + client_id
    if apis.apis()[api_key].flexible(version):
        header += b"\x00"
    return header + body


def _decode(frame: bytes) -> dict | None:
    header = parse_request_header(frame)
    if not header.supported:
        return None
    return decode_request(header, frame)


@pytest.mark.parametrize(("spec", "version"), REQUESTS, ids=[f"{s.api}-v{v}" for s, v in REQUESTS])
def test_every_truncation_of_a_request_is_a_protocol_error(spec, version):
    c = codec.compile_message(spec, version)

    @settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version))
    def truncated(value):
        data = bytes(c.encode_new(value))
        for end in range(len(data)):
            with pytest.raises(ProtocolError):
                c.decode_all(memoryview(data)[:end])
        with pytest.raises(ProtocolError, match="left after"):
            c.decode_all(data + b"\x00")

    truncated()


@pytest.mark.parametrize("count", [0x7FFFFFFF, 0x10000000, 1 << 20])
def test_huge_array_counts_are_refused_before_any_allocation(count):
    c = apis.request_codec(apis.METADATA, 4)  # classic: int32 count
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="cannot fit"):
        c.decode_all(struct.pack(">i", count) + b"\x00\x00" * 4)
    flexible = apis.request_codec(apis.METADATA, 12)  # compact: uvarint count + 1
    varint = bytearray()
    codec.write_uvarint(varint, count + 1)
    with pytest.raises(ProtocolError, match="cannot fit"):
        flexible.decode_all(bytes(varint) + b"\x00" * 8)
    assert time.monotonic() - started < 1


def test_negative_and_huge_lengths():
    sasl = apis.request_codec(apis.SASL_AUTHENTICATE, 0)
    for n in (0x7FFFFFFF, 1 << 30, 5):
        with pytest.raises(ProtocolError, match="past the end"):
            sasl.decode_all(struct.pack(">i", n) + b"abc")
    with pytest.raises(ProtocolError):  # -2: a null (any negative length is) where none is allowed
        sasl.decode_all(struct.pack(">i", -2))
    compact = apis.request_codec(apis.SASL_AUTHENTICATE, 2)
    huge = bytearray()
    codec.write_uvarint(huge, (1 << 63) - 1)
    with pytest.raises(ProtocolError, match="past the end"):
        compact.decode_all(bytes(huge) + b"abc\x00")
    handshake = apis.request_codec(apis.SASL_HANDSHAKE, 1)  # classic int16 string length
    with pytest.raises(ProtocolError, match="past the end"):
        handshake.decode_all(b"\x7f\xffPLAIN")
    with pytest.raises(ProtocolError, match="non-nullable string"):
        handshake.decode_all(b"\x80\x00")


def test_bad_utf8_is_a_protocol_error():
    handshake = apis.request_codec(apis.SASL_HANDSHAKE, 1)
    for bad in (b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"a\x80"):
        with pytest.raises(ProtocolError, match="UTF-8"):
            handshake.decode_all(struct.pack(">h", len(bad)) + bad)


def test_bad_varints_are_protocol_errors():
    compact = apis.request_codec(apis.SASL_AUTHENTICATE, 2)
    with pytest.raises(ProtocolError, match="longer than 10 bytes"):
        compact.decode_all(b"\xff" * 11 + b"\x01")
    with pytest.raises(ProtocolError, match="truncated varint"):
        compact.decode_all(b"\xff\xff")
    # a tag section whose count is huge: each tag needs bytes, so it ends at once
    tags = bytearray(b"\x01a")
    codec.write_uvarint(tags, 1 << 40)
    with pytest.raises(ProtocolError):
        compact.decode_all(bytes(tags))


def test_bad_request_headers():
    with pytest.raises(ProtocolError, match="shorter than its header"):
        parse_request_header(b"\x00\x12\x00")
    with pytest.raises(ProtocolError, match="past the end"):
        parse_request_header(struct.pack(">hhi", 18, 3, 1) + b"\x00\x09ab")
    with pytest.raises(ProtocolError, match="UTF-8"):
        parse_request_header(struct.pack(">hhi", 18, 3, 1) + b"\x00\x01\xff\x00")
    with pytest.raises(ProtocolError, match="truncated varint"):  # header v2 tags missing
        parse_request_header(struct.pack(">hhi", 18, 3, 1) + b"\xff\xff")
    # an unknown API or version is reported, not raised: the connection decides
    header = parse_request_header(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff")
    assert not header.supported and header.api_key == 999
    header = parse_request_header(struct.pack(">hhi", apis.FETCH, 99, 1) + b"\xff\xff")
    assert not header.supported and not header.flexible


def _mutations(rng: random.Random, frame: bytes) -> list[bytes]:
    out = []
    for _ in range(6):
        b = bytearray(frame)
        kind = rng.randrange(5)
        if kind == 0 and b:  # flip bytes
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 1:  # insert a length-ish run
            at = rng.randrange(len(b) + 1)
            b[at:at] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\xff" * 10, b"\x80"])
        elif kind == 2 and b:  # delete a slice
            at = rng.randrange(len(b))
            del b[at : at + rng.randint(1, 8)]
        elif kind == 3:  # truncate
            del b[rng.randrange(len(b) + 1) :]
        else:  # append garbage
            b += rng.randbytes(rng.randint(1, 16))
        out.append(bytes(b))
    return out


def _fuzz_one(spec, version: int, rng: random.Random) -> int:
    """Mutations of a few valid frames of one request version; the number tried."""
    c = codec.compile_message(spec, version)
    tried = 0

    @settings(max_examples=2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version))
    def fuzz(value):
        nonlocal tried
        valid = _frame(spec.api_key, version, bytes(c.encode_new(value)))
        assert _decode(valid) is not None
        for frame in _mutations(rng, valid):
            tried += 1
            started = time.monotonic()
            with contextlib.suppress(ProtocolError):
                _decode(frame)
            assert time.monotonic() - started < 1, frame.hex()

    fuzz()
    return tried


def test_fuzz_mutated_request_frames():
    """Every mutation of a valid frame is decoded or refused with ProtocolError, quickly."""
    rng = random.Random(2105)
    deadline = time.monotonic() + 20
    frames = 0
    for spec, version in REQUESTS:
        frames += _fuzz_one(spec, version, rng)
        if time.monotonic() > deadline:
            break
    assert frames > 500


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.sampled_from(sorted(apis.apis())),
    st.integers(-2, 20),
    st.binary(max_size=64),
)
def test_fuzz_random_bodies(api_key, version, body):
    """Random bytes after a well-formed header: decoded or ProtocolError, nothing else."""
    frame = struct.pack(">hhi", api_key, version, 1) + b"\xff\xff"
    api = apis.apis()[api_key]
    if api.supports(version) and api.flexible(version):
        frame += b"\x00"
    with contextlib.suppress(ProtocolError):
        _decode(frame + body)
