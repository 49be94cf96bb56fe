"""The binary produce frame's header: what the SDK writes, the broker reads (pure)."""

from __future__ import annotations

import struct

import pytest

from brokernodes.client.produce_stream import answer_error, encode_binary_produce_header
from brokernodes.server.protocol.ws_frames import (
    MAX_BINARY_HEADER_BYTES,
    ProtocolViolation,
    RequestError,
    parse_binary_produce,
)


def test_the_sdks_header_parses_to_the_same_request():
    frame = encode_binary_produce_header(2**40 + 7, "örders", 5) + b"BATCHES"
    request = parse_binary_produce(frame)
    assert (request.id, request.topic, request.partition) == (2**40 + 7, "örders", 5)
    assert request.batches == bytearray(b"BATCHES")
    assert isinstance(request.batches, bytearray)  # the append rewrites it in place
    assert len(encode_binary_produce_header(1, "t" * 249, 0)) <= MAX_BINARY_HEADER_BYTES


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"\x01\x00", "at least 15 bytes"),
        (struct.pack(">BQiH", 2, 1, 0, 1) + b"t" + b"B", "version 2"),
    ],
)
def test_an_unreadable_header_ends_the_stream(frame, words):
    with pytest.raises(ProtocolViolation, match=words):
        parse_binary_produce(frame)


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (struct.pack(">BQiH", 1, 9, 0, 0) + b"B", "topic"),
        (struct.pack(">BQiH", 1, 9, 0, 40) + b"short", "topic"),
        (struct.pack(">BQiH", 1, 9, 0, 2) + b"\xff\xfeB", "UTF-8"),
        (struct.pack(">BQiH", 1, 9, -1, 1) + b"tB", "partition"),
        (struct.pack(">BQiH", 1, 9, 0, 1) + b"t", "batches"),
    ],
)
def test_a_bad_request_is_answered_under_its_id(frame, words):
    with pytest.raises(RequestError, match=words) as e:
        parse_binary_produce(frame)
    assert e.value.request_id == 9 and e.value.error_code == "INVALID_REQUEST"


def test_error_answers_become_broker_errors_with_details():
    e = answer_error(
        {"id": 3, "error_code": "NOT_LEADER_OR_FOLLOWER", "message": "m", "leader_url": "u"},
        "http://b",
    )
    assert (e.error_code, e.message, e.details, e.retriable) == (
        "NOT_LEADER_OR_FOLLOWER",
        "m",
        {"leader_url": "u"},
        True,
    )
    assert answer_error({"id": 1, "error_code": "KAFKA_STORAGE_ERROR"}, "u").retriable
    assert not answer_error(
        {"id": 1, "error_code": "CORRUPT_MESSAGE", "message": "x"}, "u"
    ).retriable
