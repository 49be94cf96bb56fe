"""The direct encoding of the usual Fetch answer writes the generated codec's bytes, with
the record data as bytes (the live tail) or as a deferred chunk (segment slices)."""

from __future__ import annotations

import uuid

import pytest

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.fetch_answer import FIRST_VERSION, encode_single_answer

VERSIONS = range(FIRST_VERSION, apis.apis()[apis.FETCH].max_version + 1)
TOPIC_ID = uuid.uuid4().bytes


class Deferred:
    """Stands for open segment slices: only a length, sent apart from the bytes."""

    def __init__(self, length: int) -> None:
        self.length = length


def generated(version, records, read_committed, throttle):
    topic = {"topic": "é-orders", "topic_id": TOPIC_ID}
    topic["partitions"] = [
        {
            "partition_index": 3,
            "error_code": 0,
            "high_watermark": 2**40,
            "last_stable_offset": 2**40 - 5,
            "log_start_offset": 7,
            "aborted_transactions": [] if read_committed else None,
            "preferred_read_replica": -1,
            "records": records,
        }
    ]
    body = {
        "throttle_time_ms": throttle,
        "error_code": 0,
        "session_id": 0,
        "responses": [topic],
        "node_endpoints": [],
    }
    return apis.response_codec(apis.FETCH, version).encode_new(body)


def direct(version, records, read_committed, throttle):
    return encode_single_answer(
        version, "é-orders", TOPIC_ID, 3, 2**40, 2**40 - 5, 7, not read_committed, records, throttle
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("records", [b"", b"r" * 200, None])
def test_bytes_records_match(version, read_committed, records):
    expected = generated(version, records, read_committed, 40)
    chunks, size = direct(version, records, read_committed, 40)
    assert chunks == expected.chunks() and size == expected.size
    decoded = apis.response_codec(apis.FETCH, version).decode_all(chunks[0])
    part = decoded["responses"][0]["partitions"][0]
    assert (part["partition_index"], part["high_watermark"], part["log_start_offset"]) == (
        3,
        2**40,
        7,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_deferred_records_stay_a_chunk_of_their_own(version):
    records = Deferred(300)  # 300 + 1 needs a two-byte length varint
    expected = generated(version, records, False, 0)
    chunks, size = direct(version, records, False, 0)
    assert chunks == expected.chunks() and size == expected.size
    assert chunks[1] is records
