"""The console's credentials on the brokers: one service account per organisation.

The console reads and writes records by calling the brokers on the signed-in user's behalf
(Django checks the user's role first). It authenticates there as the organisation's
``sluice-console`` service account (role ``member``: the brokers grant it read and write on
the organisation's topics and nothing else, so tenant isolation is the brokers' as for any
key). Its API key is an ordinary ``ApiKey`` row whose secret is **derived, never stored**:
``secret = base64url(HMAC-SHA256(SLUICE_CLUSTER_SECRET, "sluice-console:<org id>:<key id>"))``.
Only the SHA-256 of it is stored and published in the metadata log, like any key's, so the
brokers need no new code. Rotating the cluster secret changes every derived secret; the next
console call notices the stored hash no longer matches and republishes it.

An admin may revoke the key (a new one is made on the next call) or deactivate the service
account (the console's message browser then answers ``CONSOLE_KEY_DISABLED``).
"""

from __future__ import annotations

import base64
import hmac

from django.conf import settings
from django.db import transaction

from backend.cluster import services as cluster
from backend.core.exceptions import ApplicationError
from backend.keys import tokens
from backend.keys.models import ApiKey
from backend.tenancy import roles
from backend.tenancy.models import ServiceAccount

CONSOLE_SERVICE_ACCOUNT = "sluice-console"
CONSOLE_KEY_DESCRIPTION = "web console (secret derived from the cluster secret, never stored)"


class ConsoleUnavailable(ApplicationError):
    status_code = 503
    error_code = "CONSOLE_UNAVAILABLE"


class ConsoleKeyDisabled(ApplicationError):
    status_code = 403
    error_code = "CONSOLE_KEY_DISABLED"


def derive_secret(cluster_secret: str, organisation_id: str, key_id: str) -> str:
    """The console key's secret: 32 bytes of HMAC-SHA256, base64url without padding (43
    characters, the shape of every Sluice secret)."""
    mac = hmac.new(
        cluster_secret.encode(), f"sluice-console:{organisation_id}:{key_id}".encode(), "sha256"
    ).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def _cluster_secret() -> str:
    secret = settings.SLUICE_CLUSTER_SECRET
    if not secret:
        raise ConsoleUnavailable(
            "the message browser needs SLUICE_CLUSTER_SECRET set on the control plane"
        )
    return secret


def console_token(organisation) -> str:
    """``slk_<key_id>.<secret>`` of the organisation's console key, made on first use.
    The common case is one read (no write transaction: pages poll through this)."""
    secret_root = _cluster_secret()
    key = (
        ApiKey.objects.select_related("service_account")
        .filter(
            organisation=organisation,
            service_account__name=CONSOLE_SERVICE_ACCOUNT,
            revoked_at__isnull=True,
            description=CONSOLE_KEY_DESCRIPTION,
        )
        .order_by("-created_at")
        .first()
    )
    if key is not None and key.service_account.is_active:
        secret = derive_secret(secret_root, str(organisation.id), key.key_id)
        if tokens.secret_matches(secret, key.secret_sha256):
            return tokens.format_token(key.key_id, secret)
    return _ensure_token(organisation, secret_root)


@transaction.atomic
def _ensure_token(organisation, secret_root: str) -> str:
    """Create the service account or key, or republish a rotated hash, under a lock."""
    sa, _ = ServiceAccount.objects.get_or_create(
        organisation=organisation,
        name=CONSOLE_SERVICE_ACCOUNT,
        defaults={
            "role": roles.MEMBER,
            "description": "the web console reads and produces through this account",
        },
    )
    if not sa.is_active:
        raise ConsoleKeyDisabled(
            f"an admin deactivated the {CONSOLE_SERVICE_ACCOUNT!r} service account; "
            "reactivate it to browse and produce from the console"
        )
    key = (
        ApiKey.objects.select_for_update()
        .filter(service_account=sa, revoked_at__isnull=True, description=CONSOLE_KEY_DESCRIPTION)
        .order_by("-created_at")
        .first()
    )
    if key is None:
        key_id = tokens.new_key_id()
        secret = derive_secret(secret_root, str(organisation.id), key_id)
        key = ApiKey.objects.create(
            key_id=key_id,
            organisation=organisation,
            service_account=sa,
            secret_sha256=tokens.hash_secret(secret),
            description=CONSOLE_KEY_DESCRIPTION,
            created_by="system",
        )
        cluster.publish_api_key(key)
        return tokens.format_token(key_id, secret)
    secret = derive_secret(secret_root, str(organisation.id), key.key_id)
    if not tokens.secret_matches(secret, key.secret_sha256):  # the cluster secret rotated
        key.secret_sha256 = tokens.hash_secret(secret)
        key.save(update_fields=["secret_sha256"])
        cluster.publish_api_key(key)
    return tokens.format_token(key.key_id, secret)
