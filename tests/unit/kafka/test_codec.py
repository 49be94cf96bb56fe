"""The generated codecs: every API and version round-trips, and the wire details that are
easy to get wrong (tagged fields, nullable structs, compact vs classic encodings, defaults,
nulls where Kafka allows none, deferred record data) are pinned with exact bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings

from brokernodes.server.protocol.kafka import apis, codec
from brokernodes.server.protocol.kafka.codec import Out, ProtocolError
from tests.unit.kafka.codec_values import every_message_version, message_value, plain

CASES = every_message_version()


@pytest.mark.parametrize(
    ("spec", "version"), CASES, ids=[f"{s.api}-{s.kind}-v{v}" for s, v in CASES]
)
def test_every_message_version_round_trips(spec, version):
    c = codec.compile_message(spec, version)

    @settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version))
    def round_trip(value):
        data = bytes(c.encode_new(value))
        assert plain(c.decode_all(data)) == value
        assert bytes(c.encode_new(c.decode_all(data))) == data

    round_trip()


def test_every_api_has_both_messages_over_the_same_versions():
    specs = apis._specs()
    for key in apis.apis():
        request, response = specs[key, "request"], specs[key, "response"]
        assert request.versions == response.versions, request.api
        assert request.flexible_from == response.flexible_from, request.api


# --- classic vs compact encodings ----------------------------------------------------------


def test_metadata_v8_is_classic_and_v9_compact():
    request = {"topics": [{"name": "ab"}], "allow_auto_topic_creation": True}
    v8 = bytes(apis.request_codec(apis.METADATA, 8).encode_new(request))
    v9 = bytes(apis.request_codec(apis.METADATA, 9).encode_new(request))
    # v8: int32 count, int16 length + "ab", then three booleans
    assert v8 == b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x01\x00\x00"
    # v9: uvarint count+1, uvarint length+1 + "ab", the topic's tags, booleans, the tags
    assert v9 == b"\x02" + b"\x03ab" + b"\x00" + b"\x01\x00\x00" + b"\x00"


def test_null_string_array_and_bytes_in_both_encodings():
    # Metadata v1+: a null topic array asks for every topic
    classic = apis.request_codec(apis.METADATA, 4)
    compact = apis.request_codec(apis.METADATA, 12)
    assert bytes(classic.encode_new({"topics": None}))[:4] == b"\xff\xff\xff\xff"
    assert bytes(compact.encode_new({"topics": None}))[:1] == b"\x00"
    assert classic.decode_all(classic.encode_new({"topics": None}))["topics"] is None
    assert compact.decode_all(compact.encode_new({"topics": None}))["topics"] is None
    # SaslAuthenticate v0 (classic bytes) vs v2 (compact bytes)
    v0 = apis.request_codec(apis.SASL_AUTHENTICATE, 0)
    v2 = apis.request_codec(apis.SASL_AUTHENTICATE, 2)
    assert bytes(v0.encode_new({"auth_bytes": b"xyz"})) == b"\x00\x00\x00\x03xyz"
    assert bytes(v2.encode_new({"auth_bytes": b"xyz"})) == b"\x04xyz\x00"


def test_long_compact_lengths_use_multi_byte_varints():
    v2 = apis.request_codec(apis.SASL_AUTHENTICATE, 2)
    token = b"t" * 300
    data = bytes(v2.encode_new({"auth_bytes": token}))
    assert data[:2] == bytes([(301 & 0x7F) | 0x80, 301 >> 7])
    assert v2.decode_all(data)["auth_bytes"] == token


# --- tagged fields -------------------------------------------------------------------------


def _api_versions_v3(tags: bytes) -> bytes:
    """An ApiVersions v3 response with one API and the given top-level tag section."""
    return (
        b"\x00\x00"  # error_code
        + b"\x02"  # one api key
        + b"\x00\x12\x00\x00\x00\x04\x00"  # api 18, versions 0..4, its tags
        + b"\x00\x00\x00\x00"  # throttle_time_ms
        + tags
    )


def test_known_tags_are_read_and_unknown_ones_skipped():
    c = apis.response_codec(apis.API_VERSIONS, 3)
    epoch = struct.pack(">q", 7)
    tags = (
        b"\x03"  # three tagged fields
        + b"\x01\x08"
        + epoch  # tag 1: finalized_features_epoch, 8 bytes
        + b"\x63\x03abc"  # tag 99: unknown to Sluice, 3 bytes
        + b"\x03\x01\x01"  # tag 3: zk_migration_ready = true
    )
    m = c.decode_all(_api_versions_v3(tags))
    assert m["finalized_features_epoch"] == 7
    assert m["zk_migration_ready"] is True
    assert m["supported_features"] == []
    assert m["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_absent_tags_take_their_defaults_and_defaults_are_not_written():
    c = apis.response_codec(apis.API_VERSIONS, 3)
    m = c.decode_all(_api_versions_v3(b"\x00"))
    assert m["finalized_features_epoch"] == -1  # Kafka's default for the field
    assert m["zk_migration_ready"] is False
    assert bytes(c.encode_new(m)) == _api_versions_v3(b"\x00")
    m["finalized_features_epoch"] = 7
    assert bytes(c.encode_new(m)).endswith(b"\x01\x01\x08" + struct.pack(">q", 7))


def test_unknown_tags_in_nested_structs_are_skipped():
    c = apis.request_codec(apis.METADATA, 12)
    plain_topic = b"\x02" + b"\x00" * 16 + b"\x03ab" + b"\x00" + b"\x01\x00" + b"\x00"
    tagged_topic = (
        b"\x02" + b"\x00" * 16 + b"\x03ab" + b"\x02\x05\x01z\x07\x00" + b"\x01\x00" + b"\x00"
    )
    assert c.decode_all(tagged_topic) == c.decode_all(plain_topic)
    assert c.decode_all(tagged_topic)["topics"][0]["name"] == "ab"


def test_a_tagged_struct_round_trips():
    c = apis.request_codec(apis.FETCH, 15)
    m = c.decode_all(c.encode_new({"replica_state": {"replica_id": 3, "replica_epoch": 9}}))
    assert m["replica_state"] == {"replica_id": 3, "replica_epoch": 9}
    assert m["cluster_id"] is None


def test_a_tag_whose_value_is_shorter_than_declared_is_malformed():
    c = apis.response_codec(apis.API_VERSIONS, 3)
    with pytest.raises(ProtocolError):
        c.decode_all(_api_versions_v3(b"\x01\x01\x04\x00\x00\x00\x07"))  # int64 in 4 bytes
    with pytest.raises(ProtocolError):
        c.decode_all(_api_versions_v3(b"\x01\x01\x08\x00"))  # runs past the end


# --- nullable structs ----------------------------------------------------------------------


def test_nullable_struct_marker():
    c = apis.response_codec(apis.CONSUMER_GROUP_HEARTBEAT, 0)
    empty = bytes(c.encode_new({"assignment": None}))
    full = bytes(c.encode_new({"assignment": {"topic_partitions": []}}))
    assert c.decode_all(empty)["assignment"] is None
    assert c.decode_all(full)["assignment"] == {"topic_partitions": []}
    # the struct is a -1 (null) or 1 (present) byte before its fields
    assert len(full) == len(empty) + 2  # 0x01, an empty compact array, its tags - 0xff
    assert empty[-2:] == b"\xff\x00"


# --- defaults ------------------------------------------------------------------------------


def test_old_versions_decode_with_the_newer_fields_defaults():
    c = apis.request_codec(apis.FETCH, 4)
    data = c.encode_new(
        {
            "max_wait_ms": 500,
            "min_bytes": 1,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5}]}],
        }
    )
    m = c.decode_all(data)
    assert m["replica_id"] == -1
    assert m["max_bytes"] == 0x7FFFFFFF
    assert m["session_epoch"] == -1
    assert m["rack_id"] == ""
    assert m["forgotten_topics_data"] == []
    assert m["topics"][0]["topic_id"] == bytes(16)
    partition = m["topics"][0]["partitions"][0]
    assert partition["current_leader_epoch"] == -1
    assert partition["log_start_offset"] == -1
    assert partition["fetch_offset"] == 5


def test_decoded_defaults_are_never_shared_between_messages():
    c = apis.request_codec(apis.FETCH, 4)
    first = c.decode_all(c.encode_new({}))
    first["forgotten_topics_data"].append("x")
    assert c.decode_all(c.encode_new({}))["forgotten_topics_data"] == []


# --- nulls Kafka does not allow ------------------------------------------------------------


def test_null_in_a_non_nullable_field_is_malformed():
    topics = apis.request_codec(apis.CREATE_TOPICS, 4)
    # a null topic array (int32 -1) where CreateTopics allows none
    with pytest.raises(ProtocolError, match="non-nullable array"):
        topics.decode_all(b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00")
    metadata = apis.request_codec(apis.METADATA, 4)
    with pytest.raises(ProtocolError, match="non-nullable string"):
        metadata.decode_all(b"\x00\x00\x00\x01\xff\xff\x01")  # a topic name null
    sasl = apis.request_codec(apis.SASL_AUTHENTICATE, 0)
    with pytest.raises(ProtocolError, match="non-nullable bytes"):
        sasl.decode_all(b"\xff\xff\xff\xff")


def test_encoder_writes_empty_values_for_a_handlers_none_in_non_nullable_fields():
    c = apis.response_codec(apis.DESCRIBE_CLUSTER, 0)
    m = c.decode_all(c.encode_new({"cluster_id": None, "brokers": None}))
    assert m["cluster_id"] == ""
    assert m["brokers"] == []
    # None UUIDs are the zero UUID (Kafka's "no id")
    d = apis.request_codec(apis.DELETE_TOPICS, 6)
    assert d.decode_all(d.encode_new({"topics": [{"name": "t", "topic_id": None}]}))["topics"][0][
        "topic_id"
    ] == bytes(16)
    with pytest.raises(ValueError, match="16 bytes"):
        d.encode_new({"topics": [{"name": "t", "topic_id": b"short"}]})


# --- record data ---------------------------------------------------------------------------


def test_records_decode_as_views_of_the_request():
    c = apis.request_codec(apis.PRODUCE, 9)
    batch = b"B" * 40
    data = bytearray(
        c.encode_new(
            {
                "acks": -1,
                "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
            }
        )
    )
    m = c.decode_all(memoryview(data))  # as frames.decode_request hands it
    records = m["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview)
    assert bytes(records) == batch
    assert records.obj is data  # no copy


class _Deferred:
    """Stands in for the fetch path's open segment slices (``FileRecords``)."""

    def __init__(self, length: int) -> None:
        self.length = length


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_deferred_records_split_the_answer_into_chunks(version):
    c = apis.response_codec(apis.FETCH, version)
    first, second = _Deferred(100), _Deferred(50)
    partitions = [
        {"partition_index": 0, "high_watermark": 10, "records": first},
        {"partition_index": 1, "high_watermark": 10, "records": second},
    ]
    out = c.encode_new({"responses": [{"topic": "t", "partitions": partitions}]})
    chunks = out.chunks()
    assert [type(x) for x in chunks] == [bytes, _Deferred, bytes, _Deferred, bytes]
    assert chunks[1] is first and chunks[3] is second
    assert out.size == sum(len(x) for x in chunks if isinstance(x, bytes)) + 150
    # the same message with the bytes in place decodes to them
    whole = b"".join(x if isinstance(x, bytes) else b"r" * x.length for x in chunks)
    m = c.decode_all(whole)
    got = [bytes(p["records"]) for p in m["responses"][0]["partitions"]]
    assert got == [b"r" * 100, b"r" * 50]


def test_out_without_deferred_values_is_one_chunk():
    out = Out()
    out += b"abc"
    assert out.chunks() == [b"abc"]
    assert out.size == 3


def test_uuid_bytes():
    assert codec.uuid_bytes("00000000-0000-0000-0000-000000000001") == bytes(15) + b"\x01"
    assert codec.uuid_bytes("not a uuid") == bytes(16)
    assert codec.uuid_bytes(None) == bytes(16)  # type: ignore[arg-type]
