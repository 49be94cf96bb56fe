"""Authentication and authorization: the one choke point every HTTP and WebSocket handler
calls (``authorize``).

An API key is ``<key_id>.<secret>`` sent as ``Authorization: Bearer <key>``. The broker keeps
only ``sha256(secret)`` (from metadata) and compares digests in constant time. ACLs (the
control-plane issue) will plug into ``authorize`` without changing its callers. Secrets are
never logged or echoed: errors name only the key id.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.metadata import ClusterMetadata

_DUMMY_DIGEST = "0" * 64


@dataclass(frozen=True, slots=True)
class Principal:
    name: str  # e.g. "User:test"
    key_id: str


def parse_bearer(header: str | None) -> tuple[str, str]:
    """``Bearer <key_id>.<secret>`` -> (key_id, secret); raises ``UnauthenticatedError``."""
    if not header:
        raise UnauthenticatedError(
            "this endpoint needs an API key: send 'Authorization: Bearer <key_id>.<secret>'"
        )
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthenticatedError("the Authorization header must be 'Bearer <key_id>.<secret>'")
    key_id, dot, secret = token.strip().partition(".")
    if not dot or not key_id or not secret:
        raise UnauthenticatedError("an API key has the form '<key_id>.<secret>'")
    return key_id, secret


def authenticate(metadata: ClusterMetadata, header: str | None) -> Principal:
    """Check the bearer API key against the metadata's key hashes (constant-time)."""
    key_id, secret = parse_bearer(header)
    key = metadata.api_keys.get(key_id)
    digest = hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()
    expected = key.secret_sha256 if key is not None else _DUMMY_DIGEST
    if not hmac.compare_digest(digest, expected) or key is None:
        raise UnauthenticatedError(
            "unknown or revoked API key; check the key id and secret (the secret is shown "
            "only once, when the key is created)"
        )
    return Principal(key.principal, key_id)


def authorize(
    metadata: ClusterMetadata,
    header: str | None,
    operation: str,
    resource_type: str = "cluster",
    resource_name: str = "",
) -> Principal:
    """The single authorization choke point: who is calling, and may they do this?

    Today every authenticated principal may do everything (no ACLs in the static metadata);
    the control-plane issue adds the ACL check here (deny wins, no match = deny).
    """
    principal = authenticate(metadata, header)
    del operation, resource_type, resource_name  # ACLs: control-plane issue
    return principal
