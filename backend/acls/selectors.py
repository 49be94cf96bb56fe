from __future__ import annotations

import uuid

from django.db.models import QuerySet

from backend.acls.models import AclBinding
from backend.core.exceptions import NotFound
from brokernodes.security import acl


def acl_list(*, organisation, **filters: str) -> QuerySet[AclBinding]:
    """Bindings of the organisation; filters compare exactly (principal, resource_type...)."""
    qs = AclBinding.objects.filter(organisation=organisation)
    clean = {k: v for k, v in filters.items() if v not in (None, "")}
    return qs.filter(**clean)


def acl_get(*, organisation, acl_id) -> AclBinding:
    try:
        pk = uuid.UUID(str(acl_id))
    except ValueError:
        pk = None
    binding = acl_list(organisation=organisation).filter(pk=pk).first() if pk else None
    if binding is None:
        raise NotFound("no such ACL binding in this organisation")
    return binding


def acl_authorizer(*, organisation) -> acl.Authorizer:
    """The organisation's bindings as the pure authorizer brokers use (same decisions)."""
    return acl.Authorizer(
        acl.AclBinding.from_dict(b.as_dict()) for b in acl_list(organisation=organisation)
    )
