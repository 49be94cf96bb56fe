"""Confluent REST Proxy error codes and media type negotiation (protocol.confluent)."""

from __future__ import annotations

import pytest

from brokernodes.errors import (
    InvalidRequestError,
    KafkaStorageError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    SluiceError,
    UnauthenticatedError,
    UnknownTopicOrPartitionError,
)
from brokernodes.server.protocol.confluent import (
    JSON,
    SPECIFIC_CODES,
    V2,
    V2_BINARY,
    V2_JSON,
    ConsumerFormatMismatchError,
    NotAcceptableError,
    UnsupportedMediaTypeError,
    check_content_type,
    confluent_error_body,
    confluent_status_code,
    is_confluent_path,
    negotiate,
    records_media_type,
    retriable,
)
from brokernodes.server.protocol.json_records import EmptyPayloadError, InvalidPayloadError
from brokernodes.server.protocol.responses import STATUS_BY_CODE


def coded(code: str) -> SluiceError:
    err = SluiceError("x")
    err.error_code = code
    return err


@pytest.mark.parametrize(
    ("path", "confluent"),
    [
        ("/v3/clusters/c/topics/t/records", True),
        ("/v3", True),
        ("/topics/orders", True),
        ("/topics/orders/partitions/0", True),
        ("/consumers/g/instances/i/records", True),
        ("/sluice/v1/topics/t/partitions/0/records", False),
        ("/v3x/foo", False),
        ("/topicsx", False),
        ("/healthz", False),
    ],
)
def test_which_routes_are_confluent_ones(path, confluent):
    assert is_confluent_path(path) is confluent


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (UnknownTopicOrPartitionError("t"), 404, 40403),
        (UnauthenticatedError("k"), 401, 40101),
        (coded("TOPIC_AUTHORIZATION_FAILED"), 403, 40301),
        (coded("GROUP_AUTHORIZATION_FAILED"), 403, 40301),
        (coded("QUOTA_EXCEEDED"), 403, 403),  # no code of Confluent's own: the status
        (coded("CONSUMER_INSTANCE_EXISTS"), 409, 40902),
        (coded("UNKNOWN_CONSUMER_INSTANCE"), 404, 40403),
        (coded("TOO_MANY_CONSUMER_INSTANCES"), 429, 42901),
        (UnsupportedMediaTypeError("m"), 415, 415),
        (NotAcceptableError("a"), 406, 406),
        (ConsumerFormatMismatchError("f"), 406, 40601),
        (InvalidRequestError("malformed JSON"), 400, 400),
        (InvalidPayloadError("unknown field"), 422, 422),
        (EmptyPayloadError("empty"), 422, 42206),
        (MessageTooLargeError("big"), 413, 413),
        (KafkaStorageError("disk"), 500, 50002),
        (NotLeaderOrFollowerError("elsewhere"), 421, 421),
        (coded("NOT_FOUND"), 404, 404),
        (coded("METHOD_NOT_ALLOWED"), 405, 405),
        (SluiceError("unexpected"), 500, 500),
    ],
)
def test_status_and_integer_code(error, status, code):
    assert confluent_status_code(error) == (status, code)


def test_every_specific_code_starts_with_its_status():
    """Confluent's integers are the HTTP status followed by two digits (or the status)."""
    for sluice, code in SPECIFIC_CODES.items():
        status = STATUS_BY_CODE.get(sluice, 500)
        assert str(code).startswith(str(status)), (sluice, code, status)


def test_an_error_may_name_its_own_code():
    err = UnknownTopicOrPartitionError("no topic")
    err.confluent_code = 40401  # a v2 route's "topic not found"
    assert confluent_status_code(err) == (404, 40401)


def test_error_body_keeps_the_sluice_code_and_details():
    err = NotLeaderOrFollowerError("led by 2")
    err.details = {"leader_id": 2}
    status, body = confluent_error_body(err)
    assert status == 421
    assert body == {
        "error_code": 421,
        "message": "led by 2",
        "sluice_code": "NOT_LEADER_OR_FOLLOWER",
        "leader_id": 2,
    }


def test_retriable():
    assert retriable(NotLeaderOrFollowerError("x"))
    assert not retriable(InvalidRequestError("x"))


def test_content_type():
    assert check_content_type(None, (JSON,)) is None
    assert check_content_type(JSON, (JSON,)) == JSON
    assert check_content_type("Application/JSON; charset=UTF-8", (JSON,)) == JSON
    assert check_content_type(V2_JSON, (V2_BINARY, V2_JSON)) == V2_JSON
    for bad in ("application/x-www-form-urlencoded", "text/plain", "application/octet-stream"):
        with pytest.raises(UnsupportedMediaTypeError, match="application/json"):
            check_content_type(bad, (JSON,))


@pytest.mark.parametrize(
    ("accept", "offered", "chosen"),
    [
        (None, (JSON,), JSON),
        ("*/*", (JSON,), JSON),
        ("application/*", (JSON,), JSON),
        ("application/json, text/plain;q=0.5", (JSON,), JSON),
        ("text/html;q=0.9, */*;q=0.1", (JSON,), JSON),
        (f"{V2_JSON}", (V2_BINARY, V2_JSON), V2_JSON),
        (f"{V2_BINARY};q=0.2, {V2_JSON}", (V2_BINARY, V2_JSON), V2_JSON),
        (f"{V2}, {JSON}", (V2, JSON), V2),
    ],
)
def test_negotiate(accept, offered, chosen):
    assert negotiate(accept, offered) == chosen


@pytest.mark.parametrize("accept", ["text/html", "application/json;q=0", "image/*", "garbage"])
def test_negotiate_refuses_what_the_route_cannot_answer(accept):
    with pytest.raises(NotAcceptableError):
        negotiate(accept, (JSON,))


def test_v2_records_media_type_follows_the_instance_format():
    assert records_media_type(None, "binary") == V2_BINARY
    assert records_media_type(None, "json") == V2_JSON
    assert records_media_type(None, "string") == V2
    assert records_media_type(V2_JSON, "json") == V2_JSON
    assert records_media_type(f"{V2_BINARY}, {V2_JSON}", "json") == V2_JSON
    assert records_media_type("application/*", "binary") == V2_BINARY
    with pytest.raises(ConsumerFormatMismatchError):
        records_media_type(V2_BINARY, "json")
    with pytest.raises(ConsumerFormatMismatchError):
        records_media_type("application/vnd.kafka.avro.v2+json", "binary")
    with pytest.raises(NotAcceptableError) as info:
        records_media_type("text/html", "binary")
    assert not isinstance(info.value, ConsumerFormatMismatchError)


def test_a_client_reads_sluice_code_from_a_confluent_error_body():
    from brokernodes.errors import BrokerError

    _, body = confluent_error_body(UnknownTopicOrPartitionError("no topic 'x'"))
    import orjson

    err = BrokerError.from_response(404, orjson.dumps(body), "http://b/v3/...")
    assert err.error_code == "UNKNOWN_TOPIC_OR_PARTITION" and err.message == "no topic 'x'"
    assert "sluice_code" not in err.details and "error_code" not in err.details
