import base64

import pytest

from brokernodes.errors import InvalidRequestError
from brokernodes.records.batch import DecodedRecord
from brokernodes.server.protocol.json_records import (
    EmptyPayloadError,
    InvalidPayloadError,
    format_timestamp,
    parse_batch,
    parse_entry,
    parse_json,
    parse_timestamp,
    render_data,
    render_records,
    typed_size,
)


def test_parse_entry_types():
    e = parse_entry(
        {
            "partition_id": 2,
            "key": {"type": "BINARY", "data": base64.b64encode(b"\x00\x01").decode()},
            "value": {"type": "JSON", "data": {"a": [1, 2]}},
            "headers": [{"name": "h", "value": base64.b64encode(b"v").decode()}, {"name": "n"}],
            "timestamp": 1234,
        }
    )
    assert e.partition == 2
    assert e.key == b"\x00\x01" and e.key_type == "BINARY"
    assert e.value == b'{"a":[1,2]}' and e.value_type == "JSON"
    assert e.headers == (("h", b"v"), ("n", None))
    assert e.timestamp == 1234
    s = parse_entry({"value": {"type": "STRING", "data": "héllo"}})
    assert s.value == "héllo".encode() and s.key is None and s.timestamp is None
    assert parse_entry({"value": {"data": 5}}).value == b"5"  # type defaults to JSON
    assert parse_entry({}).value is None


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        ([], "body: expected a JSON object"),
        ({"value": {"type": "BINARY", "data": "a"}}, "body.value.data: not valid base64"),
        ({"value": {"type": "BINARY", "data": 3}}, "body.value.data"),
        ({"value": {"type": "STRING", "data": []}}, "body.value.data"),
        ({"value": {"type": "json", "data": 1}}, "body.value.type"),
        ({"value": {"data": 1, "extra": 2}}, "body.value: unknown field"),
        ({"value": "x"}, "body.value"),
        ({"headers": {}}, "body.headers"),
        ({"headers": [{"value": "AA=="}]}, "body.headers[0]"),
        ({"partition_id": "1"}, "body.partition_id"),
        ({"partition_id": True}, "body.partition_id"),
        ({"timestamp": "x"}, "body.timestamp"),
        ({"timestamp": -5}, "body.timestamp"),
        ({"timestamp": 1.5}, "body.timestamp"),
        ({"topic": "t"}, "unknown field(s) topic"),
        ({"value": {"data": 2**70}}, "body.value.data"),
    ],
)
def test_parse_entry_errors_name_the_field(obj, where):
    with pytest.raises(InvalidRequestError) as e:
        parse_entry(obj)
    assert where in e.value.message


def test_timestamps_round_trip():
    assert parse_timestamp("2026-11-23T12:00:00.000Z", "t") == 1795435200000
    assert parse_timestamp("2026-11-23T13:00:00.250+01:00", "t") == 1795435200250
    assert parse_timestamp("2026-11-23T12:00:00", "t") == 1795435200000  # naive = UTC
    assert format_timestamp(1795435200250) == "2026-11-23T12:00:00.250Z"
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    # exact milliseconds (dividing by 1000.0 would round this one down to .998)
    assert format_timestamp(253402300799999) == "9999-12-31T23:59:59.999Z"
    assert format_timestamp(-1) is None


def test_parse_json_and_batch():
    with pytest.raises(InvalidRequestError, match="malformed JSON"):
        parse_json(b"{")
    with pytest.raises(EmptyPayloadError, match="empty"):
        parse_json(b"")
    good, bad = parse_batch(
        {"entries": [{"id": "a", "value": {"data": 1}}, {"id": "b", "key": 7}, {"id": 2}]}
    )
    assert [e.id for e in good] == ["a", "2"]
    assert [(i, e.error_code) for i, e in bad] == [("b", "INVALID_REQUEST")]
    assert isinstance(bad[0][1], InvalidPayloadError)  # Confluent's 422
    assert "entries[1].key" in bad[0][1].message
    # Confluent's schema requires every entry's id: without one nothing is appended
    for missing in ({"value": {}}, {"id": ""}, {"id": None}, {"id": True}, 5):
        with pytest.raises(InvalidPayloadError, match=r"entries\[1\]\.id: required"):
            parse_batch({"entries": [{"id": "a"}, missing]})
    _, bad = parse_batch({"entries": [{"id": "x"}, {"id": "x"}]})
    assert "used twice" in bad[0][1].message
    for doc in ({}, {"entries": {}}, {"entries": []}, {"entries": [{}] * 1001}):
        with pytest.raises(InvalidRequestError):
            parse_batch(doc)


def test_render():
    assert render_data(b'{"a": 1}', "json") == ({"a": 1}, "json")
    assert render_data(b"plain", "json") == ("plain", "text")
    assert render_data(b"\xff", "json") == ("/w==", "base64")
    assert render_data(b'{"a": 1}', "text") == ('{"a": 1}', "text")
    assert render_data(b"x", "base64") == ("eA==", "base64")
    assert render_data(None, "json") == (None, None)
    (r,) = render_records(
        [DecodedRecord(5, 9, None, b"1", [("h", b"\x00"), ("n", None)])], "json", 1
    )
    assert r == {
        "offset": 5,
        "timestamp": 9,
        "timestamp_type": "LOG_APPEND_TIME",
        "key": None,
        "key_format": None,
        "value": 1,
        "value_format": "json",
        "headers": [{"name": "h", "value": "AA=="}, {"name": "n", "value": None}],
    }
    assert typed_size(None, None) is None
    assert typed_size(None, "JSON") == {"type": "JSON", "size": 0}
