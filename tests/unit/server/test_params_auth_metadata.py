import hashlib

import pytest

from brokernodes.errors import (
    InvalidRequestError,
    NotLeaderOrFollowerError,
    SluiceError,
    UnauthenticatedError,
    UnknownTopicOrPartitionError,
)
from brokernodes.server.auth import authenticate, authorize, parse_bearer
from brokernodes.server.metadata.cluster import MetadataError, StaticMetadataSource, parse_metadata
from brokernodes.server.producer_ids import COUNTER_BITS, ProducerIdManager
from brokernodes.server.protocol.params import (
    acks_param,
    choice_param,
    int_param,
    partition_param,
    timestamp_param,
)
from brokernodes.server.protocol.responses import error_body, status_for

DOC = {
    "cluster_id": "c",
    "broker_id": 1,
    "brokers": [{"id": 1, "url": "http://a/"}, {"id": 2, "url": "http://b"}],
    "topics": [
        {"name": "t", "partitions": 2, "leaders": [1, 2], "configs": {"segment.bytes": "100"}}
    ],
    "api_keys": [
        {"key_id": "k", "secret_sha256": hashlib.sha256(b"s").hexdigest(), "principal": "User:u"}
    ],
}


def test_params():
    assert int_param({"a": "5"}, "a") == 5
    assert int_param({}, "a", 3) == 3
    for q in ({"a": "x"}, {"a": "-1"}, {"a": "11"}, {}):
        with pytest.raises(InvalidRequestError, match="'a'"):
            int_param(q, "a", minimum=0, maximum=10)
    assert [acks_param({"acks": a}) for a in ("0", "1", "all")] == [0, 1, -1]
    assert acks_param({}) == 1
    with pytest.raises(InvalidRequestError, match="acks"):
        acks_param({"acks": "2"})
    assert choice_param({}, "f", ("a", "b"), "a") == "a"
    with pytest.raises(InvalidRequestError):
        choice_param({"f": "c"}, "f", ("a", "b"), "a")
    assert partition_param("3") == 3
    for raw in ("-1", "x", ""):
        with pytest.raises(InvalidRequestError):
            partition_param(raw)
    assert timestamp_param({"timestamp": "earliest"}) == -2
    assert timestamp_param({}) == -1
    assert timestamp_param({"timestamp": "17"}) == 17
    with pytest.raises(InvalidRequestError):
        timestamp_param({"timestamp": "-3"})


def test_metadata_parse_and_lookup(tmp_path):
    m = parse_metadata(DOC)
    assert m.broker_url(1) == "http://a" and m.broker_url(3) is None
    assert m.partition("t", 1).leader == 2
    assert m.topic("t").log_config.segment_bytes == 100
    assert [p.partition for p in m.led_partitions()] == [0]
    with pytest.raises(UnknownTopicOrPartitionError):
        m.topic("x")
    with pytest.raises(UnknownTopicOrPartitionError, match=r"partitions 0\.\.1"):
        m.partition("t", 2)
    path = tmp_path / "m.json"
    path.write_text('{"cluster_id": "c", "broker_id": 1, "brokers": []}')
    assert StaticMetadataSource(path).current().topics == {}


@pytest.mark.parametrize(
    "change",
    [
        {"broker_id": "1"},
        {"topics": [{"name": "bad/name", "partitions": 1}]},
        {"topics": [{"name": "t", "partitions": 0}]},
        {"topics": [{"name": "t", "partitions": 2, "leaders": [1]}]},
        {"topics": [{"name": "t", "partitions": 1, "configs": {"no.such": "1"}}]},
        {"topics": [{"name": "t", "partitions": 1}, {"name": "t", "partitions": 1}]},
        {"api_keys": [{"key_id": "k", "secret_sha256": "abc"}]},
    ],
)
def test_bad_metadata(change):
    with pytest.raises(MetadataError):
        parse_metadata({**DOC, **change})


def test_auth():
    m = parse_metadata(DOC)
    assert parse_bearer("Bearer k.s.x") == ("k", "s.x")
    assert authenticate(m, "Bearer k.s").name == "User:u"
    assert authorize(m, "bearer k.s", "WRITE", "topic", "t").key_id == "k"
    for header in (
        None,
        "",
        "Bearer",
        "Bearer k",
        "Bearer .s",
        "Token k.s",
        "Bearer k.x",
        "Bearer z.s",
    ):
        with pytest.raises(UnauthenticatedError):
            authenticate(m, header)


def test_auth_is_remembered_per_metadata_image_only():
    """A header that passed is answered again without rehashing, but only against the same
    image: a new image without the key (revoked) refuses it, and failures are never kept."""
    m = parse_metadata(DOC)
    first = authenticate(m, "Bearer k.s")
    assert authenticate(m, "Bearer k.s") is first
    with pytest.raises(UnauthenticatedError):
        authenticate(m, "Bearer k.x")  # a wrong secret is still refused after a hit
    revoked = parse_metadata({**DOC, "api_keys": []})
    with pytest.raises(UnauthenticatedError):
        authenticate(revoked, "Bearer k.s")
    rotated = parse_metadata(
        {
            **DOC,
            "api_keys": [
                {
                    "key_id": "k",
                    "secret_sha256": hashlib.sha256(b"new").hexdigest(),
                    "principal": "User:u",
                }
            ],
        }
    )
    with pytest.raises(UnauthenticatedError):
        authenticate(rotated, "Bearer k.s")
    assert authenticate(rotated, "Bearer k.new").key_id == "k"


def test_error_bodies():
    e = NotLeaderOrFollowerError("moved", leader_id=2, leader_url="http://b")
    assert status_for(e.error_code) == 421
    assert error_body(e) == {
        "error_code": "NOT_LEADER_OR_FOLLOWER",
        "message": "moved",
        "leader_id": 2,
        "leader_url": "http://b",
    }
    assert status_for("WHATEVER") == 500
    assert error_body(SluiceError("x")) == {"error_code": "UNKNOWN_SERVER_ERROR", "message": "x"}


def test_producer_ids_survive_restart(tmp_path):
    a = ProducerIdManager(tmp_path, 3)
    ids = [a.next_id() for _ in range(5)]
    assert len(set(ids)) == 5 and all(i >> COUNTER_BITS == 3 for i in ids)
    b = ProducerIdManager(tmp_path, 3)
    assert b.next_id() > max(ids)
    (tmp_path / "x").mkdir()
    assert ProducerIdManager(tmp_path / "x", 4).next_id() >> COUNTER_BITS == 4
