from __future__ import annotations

import uuid

from django.db.models import QuerySet

from backend.core.exceptions import NotFound
from backend.quotas.models import Quota


def quota_for_organisation(*, organisation) -> Quota | None:
    return Quota.objects.filter(organisation=organisation, service_account__isnull=True).first()


def quota_list(*, organisation) -> QuerySet[Quota]:
    return Quota.objects.filter(organisation=organisation).select_related("service_account")


def quota_get(*, organisation, quota_id) -> Quota:
    try:
        pk = uuid.UUID(str(quota_id))
    except ValueError:
        pk = None
    quota = quota_list(organisation=organisation).filter(pk=pk).first() if pk else None
    if quota is None:
        raise NotFound("no such quota in this organisation")
    return quota
