"""SASL/PLAIN parsing (RFC 4616) and the SASL handlers' state rules, without sockets."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.kafka.handlers import core
from brokernodes.server.kafka.sasl import PlainCredentials, SaslError, parse_plain
from brokernodes.server.protocol.kafka import errors as kerr


def test_plain_token_without_and_with_authzid():
    assert parse_plain(b"\x00k1\x00s1") == PlainCredentials("k1", "s1")
    assert parse_plain(b"k1\x00k1\x00s1") == PlainCredentials("k1", "s1")
    assert parse_plain(memoryview(b"\x00k\xc3\xa9\x00p\x00")[:-1]).key_id == "k\u00e9"
    assert PlainCredentials("k1", "s.1").bearer == "Bearer k1.s.1"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"k1s1", "NUL"),
        (b"\x00k1\x00s1\x00x", "NUL"),
        (b"\x00\x00s1", "API key id"),
        (b"\x00k1\x00", "API key id"),
        (b"other\x00k1\x00s1", "authorization id"),
        (b"\x00k1.s1\x00s1", "the API key id alone"),
        (b"\x00\xff\x00s1", "UTF-8"),
        (b"", "NUL"),
    ],
)
def test_bad_plain_tokens(token, message):
    with pytest.raises(SaslError, match=message):
        parse_plain(token)


class _Broker:
    """Accepts key k1 with secret s1."""

    def authorize(self, header, operation, resource_type="cluster", resource_name="", count=True):
        if header != "Bearer k1.s1":
            raise UnauthenticatedError("unknown or revoked API key")
        return type("P", (), {"key_id": "k1", "tenant": None})()


def _ctx():
    from brokernodes.server.kafka.context import KafkaContext

    return KafkaContext(_Broker(), "127.0.0.1", None)  # type: ignore[arg-type]


def _run(coro):
    return asyncio.run(coro)


def test_handshake_then_authenticate():
    ctx = _ctx()
    shake = _run(core.sasl_handshake(ctx, None, {"mechanism": "PLAIN"}))
    assert shake == {"error_code": kerr.NONE, "mechanisms": ["PLAIN"]}
    answer = _run(core.sasl_authenticate(ctx, None, {"auth_bytes": b"\x00k1\x00s1"}))
    assert answer["error_code"] == kerr.NONE
    assert ctx.authenticated and ctx.principal.key_id == "k1"
    # a second handshake or authenticate on the same connection is an illegal state
    again = _run(core.sasl_handshake(ctx, None, {"mechanism": "PLAIN"}))
    assert again["error_code"] == kerr.ILLEGAL_SASL_STATE
    with pytest.raises(core.AuthenticationFailed) as failed:
        _run(core.sasl_authenticate(ctx, None, {"auth_bytes": b"\x00k1\x00s1"}))
    assert failed.value.body["error_code"] == kerr.ILLEGAL_SASL_STATE


def test_unsupported_mechanism():
    answer = _run(core.sasl_handshake(_ctx(), None, {"mechanism": "SCRAM-SHA-256"}))
    assert answer == {"error_code": kerr.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]}


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00k1\x00wrong", "unknown or revoked API key"),
        (b"garbage", "NUL"),
        (None, "NUL"),
    ],
)
def test_failed_authentication_answers_with_the_reason_and_leaves_no_credentials(token, message):
    ctx = _ctx()
    with pytest.raises(core.AuthenticationFailed) as failed:
        _run(core.sasl_authenticate(ctx, None, {"auth_bytes": token}))
    assert failed.value.body["error_code"] == kerr.SASL_AUTHENTICATION_FAILED
    assert message in failed.value.body["error_message"]
    assert not ctx.authenticated and ctx.principal is None


def test_api_versions_lists_every_supported_api():
    from brokernodes.server.protocol.kafka import apis

    body = _run(core.api_versions(_ctx(), None, {}))
    assert body["error_code"] == kerr.NONE
    ranges = {a["api_key"]: (a["min_version"], a["max_version"]) for a in body["api_keys"]}
    assert ranges == {k: (a.min_version, a.max_version) for k, a in apis.apis().items()}
