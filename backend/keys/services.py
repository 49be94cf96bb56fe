"""Creating and revoking API keys. The secret exists only in the create call's return value."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from backend.audit.services import audit_record
from backend.cluster import services as cluster
from backend.core.context import RequestContext
from backend.keys import tokens
from backend.keys.models import ApiKey
from backend.keys.signals import api_key_revoked

LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class CreatedApiKey:
    api_key: ApiKey
    token: str  # slk_<key_id>.<secret>: returned once, never stored


def api_key_snapshot(key: ApiKey) -> dict:
    return {
        "key_id": key.key_id,
        "service_account": str(key.service_account_id),
        "description": key.description,
        "revoked": key.revoked_at is not None,
    }


@transaction.atomic
def api_key_create(*, ctx: RequestContext, service_account, description: str = "") -> CreatedApiKey:
    secret = tokens.new_secret()
    key_id = tokens.new_key_id()
    while ApiKey.objects.filter(pk=key_id).exists():  # 96 random bits: never in practice
        key_id = tokens.new_key_id()
    key = ApiKey.objects.create(
        key_id=key_id,
        organisation=service_account.organisation,
        service_account=service_account,
        secret_sha256=tokens.hash_secret(secret),
        description=description,
        created_by=ctx.actor_label,
    )
    cluster.publish_api_key(key)
    audit_record(
        ctx=ctx,
        action="api_key.create",
        object_type="api_key",
        object_id=key.key_id,
        after=api_key_snapshot(key),
    )
    return CreatedApiKey(key, tokens.format_token(key_id, secret))


@transaction.atomic
def api_key_revoke(*, ctx: RequestContext, api_key: ApiKey) -> ApiKey:
    """Revocation is effective at once: authentication reads ``revoked_at`` on every request."""
    if api_key.revoked_at is not None:
        return api_key
    before = api_key_snapshot(api_key)
    api_key.revoked_at = timezone.now()
    api_key.save(update_fields=["revoked_at"])
    cluster.publish_api_key(api_key)
    key_id, org_id = api_key.key_id, api_key.organisation_id
    transaction.on_commit(
        lambda: api_key_revoked.send(sender=ApiKey, key_id=key_id, organisation_id=org_id)
    )
    audit_record(
        ctx=ctx,
        action="api_key.revoke",
        object_type="api_key",
        object_id=api_key.key_id,
        before=before,
        after=api_key_snapshot(api_key),
    )
    return api_key


def api_key_touch(api_key: ApiKey) -> None:
    """Record use, at most once per ``LAST_USED_RESOLUTION`` (not audited: not a change)."""
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now


def api_keys_used(*, key_ids: list[str]) -> int:
    """Keys the brokers saw in use (their heartbeats' ``keys_used``, broker-side ids
    ``slk_<key_id>``): ``last_used_at`` set to now where it is older than
    ``LAST_USED_RESOLUTION``, in one statement, so a key costs at most one row write a minute
    however many brokers and requests use it. Other ids (static-file keys) and unknown ones
    (deleted keys) match nothing. Returns the rows written."""
    key_ids = [k.removeprefix(tokens.PREFIX) for k in key_ids if k.startswith(tokens.PREFIX)]
    if not key_ids:
        return 0
    now = timezone.now()
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    return ApiKey.objects.filter(stale, pk__in=key_ids).update(last_used_at=now)
