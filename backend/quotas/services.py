"""Writes of quotas. Organisation quotas: platform staff only. Service-account quotas:
the organisation's admins, never above the organisation's own limits."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from backend.audit.services import audit_record
from backend.cluster import services as cluster
from backend.core.context import RequestContext
from backend.core.exceptions import Conflict, InvalidRequest, PermissionDenied, QuotaExceeded
from backend.quotas import selectors
from backend.quotas.models import QUOTA_FIELDS, Quota


def quota_snapshot(q: Quota) -> dict:
    return {
        "id": str(q.id),
        "scope": q.scope,
        "service_account": str(q.service_account_id) if q.service_account_id else None,
        **q.limits(),
    }


def _check_values(values: dict) -> None:
    bad = {
        k: ["must be a non-negative integer or null"]
        for k, v in values.items()
        if v is not None and (not isinstance(v, int) or v < 0)
    }
    unknown = {k: ["unknown quota field"] for k in values if k not in QUOTA_FIELDS}
    if bad or unknown:
        raise InvalidRequest("invalid quota values", {**bad, **unknown})


def quota_create_default(*, ctx: RequestContext, organisation) -> Quota:
    defaults = {k: v for k, v in settings.SLUICE_DEFAULT_QUOTA.items() if k in QUOTA_FIELDS}
    q = Quota.objects.create(organisation=organisation, **defaults)
    cluster.publish_quota(q)
    audit_record(
        ctx=ctx,
        action="quota.create",
        object_type="quota",
        object_id=q.id,
        after=quota_snapshot(q),
        organisation=organisation,
    )
    return q


@transaction.atomic
def quota_set_organisation(*, ctx: RequestContext, organisation, values: dict) -> Quota:
    """Platform staff set an organisation's limits (omitted fields keep their values)."""
    if ctx.role not in ("staff", "system"):
        raise PermissionDenied("only platform staff can change an organisation's quota")
    _check_values(values)
    q = selectors.quota_for_organisation(organisation=organisation)
    before = quota_snapshot(q) if q else None
    if q is None:
        q = Quota(organisation=organisation)
    for k, v in values.items():
        setattr(q, k, v)
    q.save()
    cluster.publish_quota(q)
    audit_record(
        ctx=ctx,
        action="quota.update" if before else "quota.create",
        object_type="quota",
        object_id=q.id,
        before=before,
        after=quota_snapshot(q),
        organisation=organisation,
    )
    return q


def _check_within_organisation(organisation, values: dict) -> None:
    org_q = selectors.quota_for_organisation(organisation=organisation)
    if org_q is None:
        return
    over = {
        k: [f"at most the organisation's {getattr(org_q, k)}"]
        for k, v in values.items()
        if v is not None and getattr(org_q, k) is not None and v > getattr(org_q, k)
    }
    if over:
        raise QuotaExceeded(
            "a service account's quota cannot exceed its organisation's quota", over
        )


@transaction.atomic
def quota_create_for_service_account(
    *, ctx: RequestContext, service_account, values: dict
) -> Quota:
    _check_values(values)
    if Quota.objects.filter(service_account=service_account).exists():
        raise Conflict(
            "this service account has a quota; change it instead",
            {"service_account_id": ["already has a quota"]},
        )
    _check_within_organisation(ctx.organisation, values)
    q = Quota.objects.create(
        organisation=ctx.organisation, service_account=service_account, **values
    )
    cluster.publish_quota(q)
    audit_record(
        ctx=ctx,
        action="quota.create",
        object_type="quota",
        object_id=q.id,
        after=quota_snapshot(q),
    )
    return q


@transaction.atomic
def quota_update(*, ctx: RequestContext, quota: Quota, values: dict) -> Quota:
    """Admins change a service account's quota; the organisation's needs platform staff."""
    if quota.service_account_id is None:
        raise PermissionDenied(
            "the organisation's quota is changed by platform staff; ask Sluice support"
        )
    _check_values(values)
    _check_within_organisation(ctx.organisation, values)
    before = quota_snapshot(quota)
    for k, v in values.items():
        setattr(quota, k, v)
    quota.save()
    cluster.publish_quota(quota)
    audit_record(
        ctx=ctx,
        action="quota.update",
        object_type="quota",
        object_id=quota.id,
        before=before,
        after=quota_snapshot(quota),
    )
    return quota


@transaction.atomic
def quota_delete(*, ctx: RequestContext, quota: Quota) -> None:
    if quota.service_account_id is None:
        raise PermissionDenied("the organisation's quota cannot be deleted")
    before = quota_snapshot(quota)
    qid = quota.id
    quota.delete()
    cluster.publish_quota_deleted(qid)
    audit_record(ctx=ctx, action="quota.delete", object_type="quota", object_id=qid, before=before)
