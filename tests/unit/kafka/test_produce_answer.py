"""The direct encoding of the usual Produce answer writes the generated codec's bytes."""

from __future__ import annotations

import pytest

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.produce_answer import encode_single_answer

VERSIONS = range(apis.apis()[apis.PRODUCE].min_version, apis.apis()[apis.PRODUCE].max_version + 1)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("topic", "index", "base", "append_time", "start", "throttle"),
    [
        ("orders", 0, 0, -1, 0, 0),
        ("é" * 70, 7, 2**40 + 3, 1_700_000_000_000, 12, 250),  # a two-byte length varint
    ],
)
def test_same_bytes_as_the_generated_codec(
    version, topic, index, base, append_time, start, throttle
):
    answer = {
        "responses": [
            {
                "name": topic,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": 0,
                        "base_offset": base,
                        "log_append_time_ms": append_time,
                        "log_start_offset": start,
                    }
                ],
            }
        ],
        "throttle_time_ms": throttle,
        "node_endpoints": [],
    }
    codec = apis.response_codec(apis.PRODUCE, version)
    expected = bytes(codec.encode_new(answer))
    got = encode_single_answer(version, topic, index, base, append_time, start, throttle)
    assert got == expected
    decoded = codec.decode_all(got)
    part = decoded["responses"][0]["partition_responses"][0]
    assert (decoded["responses"][0]["name"], part["index"], part["base_offset"]) == (
        topic,
        index,
        base,
    )
