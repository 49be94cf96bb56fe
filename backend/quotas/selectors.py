from __future__ import annotations

import uuid

from django.db.models import QuerySet

from backend.cluster.selectors import live_broker_urls
from backend.console import broker_info
from backend.core.exceptions import NotFound
from backend.quotas.models import Quota
from backend.topics.models import Topic


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


def organisation_usage(*, organisation) -> dict:
    """What the organisation uses of the limits the control plane can see now: topics and
    partitions (its own table, exact) and stored bytes (the partition logs their leaders
    hold, summed over the live brokers; null when no broker answered, and ``storage_partial``
    when some did not). Byte rates and connections are per broker and moment: the overview
    shows the rates; they are null here."""
    topics = Topic.objects.filter(organisation=organisation)
    infos, errors = broker_info.describe_live(live_broker_urls())
    tenant = str(organisation.id)
    stored = None
    if infos:
        stored = sum(
            int((doc.get("leader_bytes_by_tenant") or {}).get(tenant, 0)) for doc in infos.values()
        )
    return {
        "topics": topics.count(),
        "partitions": sum(topics.values_list("partitions", flat=True)),
        "storage_bytes": stored,
        "storage_partial": bool(errors),
    }
