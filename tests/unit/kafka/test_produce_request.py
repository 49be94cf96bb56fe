"""The usual Produce request's direct decoder agrees with the generated codec for every
version (the same dict, the same record bytes), and declines (None) every request it does
not cover, so those go to the generated decoder."""

from __future__ import annotations

import pytest

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.produce_request import decode_single

VERSIONS = range(3, apis.apis()[apis.PRODUCE].max_version + 1)


def _encode(version: int, body: dict) -> bytes:
    out = apis.request_codec(apis.PRODUCE, version).encode_new(body)
    return b"".join(bytes(c) for c in out.chunks())


def _generated(version: int, raw: bytes, pos: int = 0) -> dict:
    return apis.request_codec(apis.PRODUCE, version).decode(memoryview(raw)[pos:], 0)[0]


def _plain(message: dict) -> dict:
    """``message`` with its record views as bytes, to compare."""
    topics = [
        {**t, "partition_data": [
            {**p, "records": None if p["records"] is None else bytes(p["records"])}
            for p in t["partition_data"]]}
        for t in message["topic_data"]
    ]  # fmt: skip
    return {**message, "topic_data": topics}


def _request(name: str, records, *, acks: int = 1, index: int = 0, parts: int = 1) -> dict:
    data = [{"index": index + i, "records": records} for i in range(parts)]
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": name, "partition_data": data}],
    }


def _batch(nbytes: int) -> bytes:
    return encode_batch([Record(1_700_000_000_000, b"k", b"v" * nbytes)])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "name",
    ["t", "orders", "ünïcode-topic", "x" * 126, "y" * 200],  # one- and two-byte lengths
)
@pytest.mark.parametrize("nbytes", [0, 50, 200, 70_000])  # records' varint of 1, 2 and 3 bytes
def test_the_usual_request_decodes_as_the_generated_codec_does(version, name, nbytes):
    for acks, index in [(1, 0), (-1, 7), (0, 2_000_000)]:
        raw = b"HEAD" + _encode(version, _request(name, _batch(nbytes), acks=acks, index=index))
        fast = decode_single(raw, 4, version)
        if version >= 9 and len(name.encode()) + 1 >= 0x80:
            assert fast is None  # a name whose length takes two varint bytes: generated
            continue
        assert fast is not None
        assert _plain(fast) == _plain(_generated(version, raw, 4))
        assert isinstance(fast["topic_data"][0]["partition_data"][0]["records"], memoryview)


@pytest.mark.parametrize("version", VERSIONS)
def test_anything_else_is_declined(version):
    batch = _batch(10)
    declined = [
        {**_request("t", batch), "transactional_id": "txn-1"},
        _request("t", batch, parts=2),
        {**_request("t", batch), "topic_data": [_request("a", batch)["topic_data"][0]] * 2},
        {**_request("t", batch), "topic_data": []},
        _request("t", None),
    ]
    for body in declined:
        raw = _encode(version, body)
        assert decode_single(raw, 0, version) is None
        _generated(version, raw)  # the generated decoder takes it
    empty = _encode(version, _request("", batch))  # an empty name: either way, the same
    fast = decode_single(empty, 0, version)
    assert fast is None or _plain(fast) == _plain(_generated(version, empty))
    usual = _encode(version, _request("t", batch))
    for cut in range(len(usual)):  # truncated anywhere: declined, never an exception
        assert decode_single(usual[:cut], 0, version) is None


def test_tagged_fields_in_a_flexible_request_are_declined():
    raw = bytearray(_encode(11, _request("t", _batch(10))))
    raw[-1] = 1  # the request's tagged-field section: one field
    raw += b"\x05\x01z"
    assert decode_single(bytes(raw), 0, 11) is None
    assert _generated(11, bytes(raw))["acks"] == 1
