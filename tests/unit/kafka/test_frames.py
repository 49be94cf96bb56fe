"""Request headers v1/v2 and response framing: the size prefix counts every chunk (deferred
record data included), flexible answers carry header v1's tag byte, ApiVersions always
answers with header v0."""

from __future__ import annotations

import struct

import pytest

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.codec import Out, ProtocolError
from brokernodes.server.protocol.kafka.frames import (
    encode_response,
    frame_size,
    parse_request_header,
    response_frame,
)


def test_header_v1_classic_request():
    frame = struct.pack(">hhi", apis.METADATA, 4, 99) + b"\x00\x03cli" + b"BODY"
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 4, 99, "cli")
    assert h.supported and not h.flexible
    assert frame[h.body_offset :] == b"BODY"


def test_header_v2_flexible_request_skips_its_tags_and_keeps_a_null_client_id():
    tags = b"\x02\x00\x01x\x05\x02yz"  # two tagged fields the broker does not know
    frame = struct.pack(">hhi", apis.METADATA, 12, -5) + b"\xff\xff" + tags + b"BODY"
    h = parse_request_header(frame)
    assert h.client_id is None and h.correlation_id == -5
    assert h.flexible
    assert frame[h.body_offset :] == b"BODY"


def test_client_id_stays_a_classic_string_in_header_v2():
    frame = struct.pack(">hhi", apis.API_VERSIONS, 3, 1) + b"\x00\x02rd" + b"\x00" + b"B"
    h = parse_request_header(frame)
    assert h.client_id == "rd" and frame[h.body_offset :] == b"B"


@pytest.mark.parametrize(
    "tail",
    [b"", b"\x00", b"\x00\x05abc", b"\x00\x02\xff\xfe"],
    ids=["no client id", "half a length", "cut short", "not UTF-8"],
)
def test_a_malformed_client_id_is_a_protocol_error(tail):
    with pytest.raises(ProtocolError):
        parse_request_header(struct.pack(">hhi", apis.METADATA, 4, 1) + tail)
    with pytest.raises(ProtocolError):
        parse_request_header(struct.pack(">hhi", 7, 4, 1)[:7])  # shorter than a header


def test_an_unsupported_version_is_reported_not_raised():
    h = parse_request_header(struct.pack(">hhi", apis.METADATA, 999, 3) + b"\x00\x01c")
    assert not h.supported and h.client_id == "c" and h.correlation_id == 3


def test_flexible_response_has_header_v1():
    h = parse_request_header(struct.pack(">hhi", apis.METADATA, 12, 42) + b"\xff\xff\x00")
    chunks = encode_response(h, {"throttle_time_ms": 0})
    frame = b"".join(chunks)
    assert frame_size(frame[:4]) == len(frame) - 4
    assert frame[4:8] == struct.pack(">i", 42)
    assert frame[8] == 0  # header v1: an empty tag section
    body = apis.response_codec(apis.METADATA, 12).decode_all(frame[9:])
    assert body["throttle_time_ms"] == 0


def test_classic_response_has_header_v0():
    h = parse_request_header(struct.pack(">hhi", apis.METADATA, 8, 42) + b"\xff\xff")
    frame = b"".join(encode_response(h, {}))
    assert frame[4:8] == struct.pack(">i", 42)
    apis.response_codec(apis.METADATA, 8).decode_all(frame[8:])


def test_api_versions_answers_with_header_v0_even_when_flexible():
    h = parse_request_header(struct.pack(">hhi", apis.API_VERSIONS, 3, 7) + b"\xff\xff\x00")
    assert h.flexible
    frame = b"".join(encode_response(h, {"api_keys": [{"api_key": 18, "max_version": 4}]}))
    assert frame[4:8] == struct.pack(">i", 7)
    body = apis.response_codec(apis.API_VERSIONS, 3).decode_all(frame[8:])
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


class _Deferred:
    def __init__(self, length: int) -> None:
        self.length = length


def test_size_prefix_counts_deferred_chunks():
    h = parse_request_header(struct.pack(">hhi", apis.FETCH, 12, 3) + b"\xff\xff\x00")
    out = Out()
    out += b"head"
    out.defer(_Deferred(1000))
    out += b"tail"
    chunks = response_frame(h, out)
    assert isinstance(chunks[1], _Deferred)
    head = chunks[0]
    assert head[4:8] == struct.pack(">i", 3) and head[8] == 0 and head.endswith(b"head")
    assert frame_size(head[:4]) == 4 + 1 + 4 + 1000 + 4
