"""ApiVersions and the SASL exchange (SaslHandshake, SaslAuthenticate): the only requests a
connection may send before it has authenticated."""

from __future__ import annotations

import functools

from brokernodes.errors import SluiceError
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.sasl import MECHANISMS, SaslError, parse_plain
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.frames import RequestHeader


@functools.cache
def _api_keys() -> tuple[dict, ...]:
    """The advertised ranges, built once (the table is fixed for the process's life)."""
    return tuple(
        {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
        for a in apis.apis().values()
    )


def api_versions_body(error_code: int = kerr.NONE) -> dict:
    return {"error_code": error_code, "api_keys": _api_keys()}


async def api_versions(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    return api_versions_body()


async def sasl_handshake(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    mechanism = request["mechanism"]
    ok = mechanism in MECHANISMS and not ctx.authenticated
    error = (
        kerr.NONE
        if ok
        else (kerr.ILLEGAL_SASL_STATE if ctx.authenticated else kerr.UNSUPPORTED_SASL_MECHANISM)
    )
    return {"error_code": error, "mechanisms": list(MECHANISMS)}


class AuthenticationFailed(Exception):
    """The connection answered a failed SaslAuthenticate and must close after sending it."""

    def __init__(self, body: dict) -> None:
        super().__init__(body.get("error_message"))
        self.body = body


def authenticate(ctx: KafkaContext, token: bytes) -> None:
    """Check a PLAIN token; on success the context carries the credentials and principal.
    Raises ``SaslError`` or the broker's authentication error."""
    credentials = parse_plain(token)
    ctx.auth_header = credentials.bearer
    try:
        ctx.principal = ctx.authorize("DESCRIBE", "cluster")
    except BaseException:
        ctx.auth_header = None
        raise


async def sasl_authenticate(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    if ctx.authenticated:
        body = {
            "error_code": kerr.ILLEGAL_SASL_STATE,
            "error_message": "this connection has already authenticated",
        }
        raise AuthenticationFailed(body)
    try:
        authenticate(ctx, request["auth_bytes"] or b"")
    except (SaslError, SluiceError) as e:
        message = e.message if isinstance(e, SluiceError) else str(e)
        raise AuthenticationFailed(
            {"error_code": kerr.SASL_AUTHENTICATION_FAILED, "error_message": message}
        ) from None
    return {"error_code": kerr.NONE, "auth_bytes": b"", "session_lifetime_ms": 0}


HANDLERS: dict[int, Handler] = {
    apis.API_VERSIONS: api_versions,
    apis.SASL_HANDSHAKE: sasl_handshake,
    apis.SASL_AUTHENTICATE: sasl_authenticate,
}

PRE_AUTH = frozenset(HANDLERS)
