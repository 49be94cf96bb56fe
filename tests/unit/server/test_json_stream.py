"""Concatenated JSON objects split as they arrive (protocol.json_stream)."""

from __future__ import annotations

import orjson
import pytest

from brokernodes.errors import InvalidRequestError
from brokernodes.server.protocol.json_stream import ObjectSplitter, split_objects

RECORDS = [
    {"value": {"type": "JSON", "data": {"n": 1, "nested": {"a": [1, {"b": 2}]}}}},
    {"key": {"type": "STRING", "data": 'brace } and quote \\" and {'}, "value": None},
    {"value": {"type": "STRING", "data": "back\\\\slash\\\\"}},
    {"value": {"type": "STRING", "data": "ünïcödé \u2028"}},
]


def stream(sep: bytes) -> bytes:
    return sep.join(orjson.dumps(r) for r in RECORDS)


@pytest.mark.parametrize("sep", [b"", b"\n", b"\r\n", b" \t\n "])
def test_whole_body(sep):
    got = split_objects(b"\n" + stream(sep) + b"\n", 1 << 20)
    assert [orjson.loads(g) for g in got] == RECORDS


def test_split_at_every_byte_gives_each_object_once_it_is_whole():
    body = stream(b"\n")
    ends = []
    pos = 0
    for r in RECORDS:
        pos += len(orjson.dumps(r))
        ends.append(pos)
        pos += 1
    for cut in range(len(body) + 1):
        splitter = ObjectSplitter(1 << 20)
        first = splitter.feed(body[:cut])
        assert len(first) == sum(1 for e in ends if e <= cut), cut
        rest = splitter.feed(body[cut:])
        splitter.close()
        assert [orjson.loads(g) for g in first + rest] == RECORDS


def test_byte_by_byte():
    splitter = ObjectSplitter(1 << 20)
    got = []
    for i in range(len(stream(b""))):
        got += splitter.feed(stream(b"")[i : i + 1])
    splitter.close()
    assert [orjson.loads(g) for g in got] == RECORDS


@pytest.mark.parametrize("body", [b"[1, 2]", b'{"a": 1} x', b'"text"', b'{"a": 1},{"b": 2}'])
def test_what_is_not_a_stream_of_objects_is_refused(body):
    with pytest.raises(InvalidRequestError, match="expected a JSON object"):
        split_objects(body, 1 << 20)


def test_a_body_that_ends_inside_an_object_is_refused():
    with pytest.raises(InvalidRequestError, match="ended inside"):
        split_objects(b'{"a": 1}{"b": "unterminated', 1 << 20)


def test_an_oversize_record_is_refused_before_it_is_whole():
    splitter = ObjectSplitter(100)
    assert splitter.feed(b'{"a": 1}' * 20) != []  # many small ones are fine
    with pytest.raises(InvalidRequestError, match="over 100 bytes"):
        splitter.feed(b'{"big": "' + b"x" * 200)


def test_the_buffer_holds_only_the_object_under_way():
    splitter = ObjectSplitter(1 << 20)
    for _ in range(1000):
        assert splitter.feed(b'{"v": 1}\n{"w"') == [b'{"v": 1}']
        assert splitter.feed(b": 2}\n") == [b'{"w": 2}']
    assert len(splitter._buf) < 64
