from __future__ import annotations

from django.db.models import QuerySet

from backend.core.exceptions import NotFound
from backend.keys.models import ApiKey


def api_key_list(*, organisation, service_account=None, include_revoked: bool = True):
    qs: QuerySet[ApiKey] = ApiKey.objects.filter(organisation=organisation).select_related(
        "service_account"
    )
    if service_account is not None:
        qs = qs.filter(service_account=service_account)
    if not include_revoked:
        qs = qs.filter(revoked_at__isnull=True)
    return qs


def api_key_get(*, organisation, key_id: str) -> ApiKey:
    key = api_key_list(organisation=organisation).filter(pk=str(key_id)[:16]).first()
    if key is None or key.key_id != key_id:
        raise NotFound("no such API key in this organisation")
    return key


def api_key_for_authentication(key_id: str) -> ApiKey | None:
    """The key with its service account and organisation, for the authentication class only."""
    return (
        ApiKey.objects.select_related("service_account", "service_account__organisation")
        .filter(pk=key_id)
        .first()
    )
