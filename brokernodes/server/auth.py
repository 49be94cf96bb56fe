"""Authentication and authorization: the one choke point every HTTP and WebSocket handler
calls (``authorize``).

An API key is ``<key_id>.<secret>`` sent as ``Authorization: Bearer <key>``. The broker keeps
only ``sha256(secret)`` (from metadata) and compares digests in constant time. ACLs (the
control-plane metadata) are checked in ``authorize`` too, so callers never change. Secrets are
never logged or echoed: errors name only the key id.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
from contextvars import ContextVar
from dataclasses import dataclass

from brokernodes.errors import TopicAuthorizationFailedError, UnauthenticatedError
from brokernodes.security.acl import Authorizer
from brokernodes.server.metadata.cluster import ClusterMetadata, current_tenant

_DUMMY_DIGEST = "0" * 64

# The connecting client's IP address, set by the HTTP middleware for the request's task (a
# WebSocket handler runs inside it). ACL bindings match it; ``None`` means unknown, and the
# authorizer then fails closed (host-specific DENYs apply, host-specific ALLOWs do not).
current_client_host: ContextVar[str | None] = ContextVar("sluice_client_host", default=None)


@functools.lru_cache(maxsize=4096)
def client_host(peer: str | None) -> str | None:
    """The canonical IP address of a socket peer, or ``None`` when it is not an IP address
    (a Unix socket). Forwarded-for headers are not trusted: brokers face clients directly.
    Cached: every request asks, and a peer address parses the same every time."""
    if not peer:
        return None
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).compressed


@dataclass(frozen=True, slots=True)
class Principal:
    name: str  # e.g. "User:test"
    key_id: str
    tenant: str | None = None  # the key's organisation (None: static metadata)


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


class _AuthCache:
    """Successful authentications by Authorization header, for one metadata image: a new
    image (a revoked key, a new key) empties it, so nothing is answered from an image that
    is no longer current and no old image is kept alive. Only keys that passed are kept, so
    unknown headers cannot grow it; bounded all the same."""

    MAX = 4096
    image: ClusterMetadata | None = None
    principals: dict[str, Principal] = {}


class DecisionCache:
    """Successful authorizations (principal, and the tenant the request runs as) by
    (credentials, operation, resource type, resource name, client host), for one global
    metadata image. Keys, ACLs and tenants are all in that image, so a new image (a revoked
    key, an ACL change) empties the cache and the next request is decided afresh; refusals
    are never kept. Bounded: emptied when full."""

    MAX = 16384

    def __init__(self) -> None:
        self.image: object | None = None
        self.decisions: dict[tuple, tuple[Principal, str | None]] = {}

    def get(self, image: object, key: tuple) -> tuple[Principal, str | None] | None:
        if self.image is not image:
            self.image, self.decisions = image, {}
            return None
        return self.decisions.get(key)

    def put(self, key: tuple, principal: Principal, tenant: str | None) -> None:
        if len(self.decisions) >= self.MAX:
            self.decisions = {}
        self.decisions[key] = (principal, tenant)


def authenticate(metadata: ClusterMetadata, header: str | None) -> Principal:
    """Check the bearer API key against the metadata's key hashes (constant-time); a header
    already checked against this very metadata image is answered from ``_AuthCache``."""
    cache = _AuthCache
    if cache.image is not metadata:
        cache.image, cache.principals = metadata, {}
    elif header:
        principal = cache.principals.get(header)
        if principal is not None:
            return principal
    principal = _authenticate(metadata, header)
    if len(cache.principals) >= cache.MAX:
        cache.principals = {}
    cache.principals[header] = principal  # type: ignore[index]
    return principal


def _authenticate(metadata: ClusterMetadata, header: str | None) -> Principal:
    key_id, secret = parse_bearer(header)
    key = metadata.api_keys.get(key_id)
    digest = hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()
    expected = key.secret_sha256 if key is not None else _DUMMY_DIGEST
    if not hmac.compare_digest(digest, expected) or key is None:
        raise UnauthenticatedError(
            "unknown or revoked API key; check the key id and secret (the secret is shown "
            "only once, when the key is created)"
        )
    return Principal(key.principal, key_id, key.tenant)


def authorize(
    metadata: ClusterMetadata,
    header: str | None,
    operation: str,
    resource_type: str = "cluster",
    resource_name: str = "",
) -> Principal:
    """The single authorization choke point: who is calling, and may they do this?

    Static metadata (keys without a tenant): every authenticated principal may do everything.
    Control-plane metadata: the key's organisation becomes the request's tenant
    (``metadata.cluster.current_tenant``, so topic names resolve within it), and the tenant's ACLs
    decide (``brokernodes.security.acl``: deny wins, no match = deny; the service account's
    role grants its baseline, see docs/metadata-log.md). Describing the cluster (the
    tenant's own metadata) needs only authentication; an idempotent producer needs
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    """
    root = metadata.root or metadata
    principal = authenticate(root, header)
    key = root.api_keys[principal.key_id]
    if key.tenant is None:
        current_tenant.set(None)
        return principal
    current_tenant.set(key.tenant)
    authorizer = root.for_tenant(key.tenant).authorizer or _NO_ACLS
    host = current_client_host.get()
    op = operation.upper()
    rtype = resource_type.upper()
    if rtype == "CLUSTER":
        if op == "DESCRIBE":
            return principal
        decision = authorizer.authorize(principal.name, host, op, "CLUSTER", CLUSTER_NAME)
        if not decision and op == "IDEMPOTENT_WRITE":
            decision = authorizer.authorize_by_resource_type(principal.name, host, "WRITE", "TOPIC")
        if not decision:
            raise ClusterAuthorizationFailedError(
                f"{principal.name} may not {op} on the cluster: {decision.reason}"
            )
        return principal
    decision = authorizer.authorize(principal.name, host, op, rtype, resource_name)
    if not decision:
        error = {
            "GROUP": GroupAuthorizationFailedError,
            "TRANSACTIONAL_ID": TransactionalIdAuthorizationFailedError,
        }.get(rtype, TopicAuthorizationFailedError)
        raise error(
            f"{principal.name} may not {op} {rtype.lower().replace('_', ' ')} {resource_name!r}: "
            f"{decision.reason}; "
            "an admin of your organisation can change the ACLs"
        )
    return principal


CLUSTER_NAME = "kafka-cluster"
_NO_ACLS = Authorizer(())


class ClusterAuthorizationFailedError(TopicAuthorizationFailedError):
    error_code = "CLUSTER_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(TopicAuthorizationFailedError):
    error_code = "GROUP_AUTHORIZATION_FAILED"


class TransactionalIdAuthorizationFailedError(TopicAuthorizationFailedError):
    error_code = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
