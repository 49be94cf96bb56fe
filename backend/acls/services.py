"""Writes of ACL bindings, validated by the broker's own authorizer module."""

from __future__ import annotations

from django.db import transaction

from backend.acls.models import AclBinding
from backend.audit.services import audit_record
from backend.cluster import services as cluster
from backend.core.context import RequestContext
from backend.core.exceptions import Conflict, InvalidRequest
from brokernodes.security import acl


def acl_snapshot(b: AclBinding) -> dict:
    return {"id": str(b.id), **b.as_dict()}


@transaction.atomic
def acl_create(*, ctx: RequestContext, **fields: str) -> AclBinding:
    errors = acl.validate_binding(**fields)
    if errors:
        raise InvalidRequest("invalid ACL binding", errors)
    canonical = acl.AclBinding(**fields).to_dict()
    if AclBinding.objects.filter(organisation=ctx.organisation, **canonical).exists():
        raise Conflict("this ACL binding exists already")
    binding = AclBinding.objects.create(organisation=ctx.organisation, **canonical)
    cluster.publish_acl(binding)
    audit_record(
        ctx=ctx,
        action="acl.create",
        object_type="acl",
        object_id=binding.id,
        after=acl_snapshot(binding),
    )
    return binding


@transaction.atomic
def acl_delete(*, ctx: RequestContext, binding: AclBinding) -> None:
    before = acl_snapshot(binding)
    bid = binding.id
    binding.delete()
    cluster.publish_acl_deleted(bid)
    audit_record(ctx=ctx, action="acl.delete", object_type="acl", object_id=bid, before=before)
