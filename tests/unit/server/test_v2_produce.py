"""Confluent v2 produce bodies and answers (protocol.v2_produce)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from brokernodes.errors import InvalidRecordError, NotLeaderOrFollowerError, SluiceError
from brokernodes.server.protocol.confluent import V2, V2_BINARY, V2_JSON
from brokernodes.server.protocol.json_records import InvalidPayloadError
from brokernodes.server.protocol.v2_produce import answer, embedded_format, parse_records


def test_embedded_format_from_the_content_type():
    assert embedded_format(V2_JSON) == "json"
    assert embedded_format(V2_BINARY) == "binary"
    assert embedded_format(V2) == "binary"  # Confluent's default
    assert embedded_format(None) == "binary"


def test_binary_records():
    doc = {"records": [{"key": "a2V5", "value": "dmFs", "partition": 2}, {"value": None}]}
    first, second = parse_records(doc, "binary", partition=None)
    assert (first.key, first.value, first.partition) == (b"key", b"val", 2)
    assert (second.key, second.value, second.partition) == (None, None, None)


def test_json_records_keep_their_json_text():
    (rec,) = parse_records({"records": [{"key": 1, "value": {"a": [1]}}]}, "json", partition=0)
    assert (rec.key, rec.value, rec.partition) == (b"1", b'{"a":[1]}', 0)


@pytest.mark.parametrize(
    ("doc", "partition", "where"),
    [
        ({}, None, "records"),
        ({"records": []}, None, "at least one"),
        ({"records": [{"value": "x"}], "extra": 1}, None, "extra"),
        ({"records": [{"value": "x"}], "value_schema": "{}"}, None, "schema registry"),
        ({"records": [{"value": "@@"}]}, None, "records[0].value"),
        ({"records": [{"value": "eA==", "partition": 1}]}, 0, "partition"),
        ({"records": [{"value": "eA==", "partition": -1}]}, None, "records[0].partition"),
        ({"records": [{"value": "eA==", "timestamp": 1}]}, None, "timestamp"),
        ({"records": [{"value": "eA=="}] * 1001}, None, "at most 1000"),
    ],
)
def test_bad_bodies_are_payload_errors(doc, partition, where):
    with pytest.raises(InvalidPayloadError, match=where.replace("[", r"\[").replace("]", r"\]")):
        parse_records(doc, "binary", partition=partition)


@dataclass
class Result:
    partition: int | None
    offset: int | None = None
    error: SluiceError | None = None


def test_answer_in_request_order_with_retriable_and_fatal_errors():
    got = answer(
        [
            Result(0, 10),
            Result(1, error=NotLeaderOrFollowerError("moved")),
            Result(2, error=InvalidRecordError("keyless on a compacted topic")),
        ]
    )
    assert got == {
        "key_schema_id": None,
        "value_schema_id": None,
        "offsets": [
            {"partition": 0, "offset": 10, "error_code": None, "error": None},
            {"partition": 1, "offset": None, "error_code": 2, "error": "moved"},
            {
                "partition": 2,
                "offset": None,
                "error_code": 1,
                "error": "keyless on a compacted topic",
            },
        ],
    }
