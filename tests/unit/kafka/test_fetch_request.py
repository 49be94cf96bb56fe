"""The usual Fetch request's direct decoder agrees with the generated codec for every
flexible version (the same dict), and declines (None) every request it does not cover, so
those go to the generated decoder."""

from __future__ import annotations

import pytest

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.fetch_request import decode_single

VERSIONS = range(4, apis.apis()[apis.FETCH].max_version + 1)
TOPIC_ID = bytes(range(1, 17))


def _encode(version: int, body: dict) -> bytes:
    out = apis.request_codec(apis.FETCH, version).encode_new(body)
    return b"".join(bytes(c) for c in out.chunks())


def _generated(version: int, raw: bytes, pos: int = 0) -> dict:
    return apis.request_codec(apis.FETCH, version).decode(memoryview(raw)[pos:], 0)[0]


def _partition(index: int = 0, offset: int = 42, **extra) -> dict:
    return {
        "partition": index,
        "current_leader_epoch": 3,
        "fetch_offset": offset,
        "last_fetched_epoch": 2,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
        **extra,
    }


def _request(
    topic: str = "orders", *, parts: int = 1, topics: int = 1, rack: str = "", **extra
) -> dict:
    return {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52_428_800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": TOPIC_ID,
                "partitions": [_partition(i, 100 + i) for i in range(parts)],
            }
            for _ in range(topics)
        ],
        "forgotten_topics_data": [],
        "rack_id": rack,
        **extra,
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("topic", ["t", "orders", "ünïcode-topic", "x" * 126, "y" * 200])
@pytest.mark.parametrize("rack", ["", "rack-a"])
def test_the_usual_request_decodes_as_the_generated_codec_does(version, topic, rack):
    raw = b"HEAD" + _encode(version, _request(topic, rack=rack, isolation_level=0))
    fast = decode_single(raw, 4, version)
    if version < 12 or (version == 12 and len(topic.encode()) + 1 >= 0x80):
        assert fast is None  # not covered: the generated decoder reads it
        return
    assert fast is not None
    assert fast == _generated(version, raw, 4)
    assert fast["topics"][0]["partitions"][0]["fetch_offset"] == 100
    assert fast["rack_id"] == rack
    assert fast["topics"][0]["topic" if version == 12 else "topic_id"] == (
        topic if version == 12 else TOPIC_ID
    )


@pytest.mark.parametrize("version", range(12, apis.apis()[apis.FETCH].max_version + 1))
def test_what_it_does_not_cover_goes_to_the_generated_decoder(version):
    declined = [
        _request(parts=2),
        _request(topics=2),
        _request(topics=0),
        _request(forgotten_topics_data=[{"topic": "a", "topic_id": TOPIC_ID, "partitions": [1]}]),
        _request(cluster_id="cluster"),  # a tagged field of the request
        _request(rack="r" * 200),
    ]
    if version >= 15:
        declined.append(_request(replica_state={"replica_id": 1, "replica_epoch": 4}))
    if version >= 17:
        tagged = _request()
        tagged["topics"][0]["partitions"][0]["replica_directory_id"] = TOPIC_ID
        declined.append(tagged)
    for body in declined:
        raw = _encode(version, body)
        assert decode_single(raw, 0, version) is None
        _generated(version, raw)  # and the generated decoder reads it


@pytest.mark.parametrize("version", range(12, apis.apis()[apis.FETCH].max_version + 1))
def test_truncated_or_malformed_requests_are_declined(version):
    raw = _encode(version, _request())
    assert decode_single(raw, 0, version) is not None
    for cut in range(len(raw) - 1):
        assert decode_single(raw[:cut], 0, version) is None
    bad_name = bytearray(_encode(12, _request(topic="abc")))
    bad_name[bad_name.index(b"abc") : bad_name.index(b"abc") + 3] = b"\xff\xfe\xfd"
    assert decode_single(bytes(bad_name), 0, 12) is None


def test_trailing_bytes_are_ignored_as_the_generated_decoder_ignores_them():
    raw = _encode(17, _request()) + b"\x00\x00\x00"
    assert decode_single(raw, 0, 17) == _generated(17, raw)
