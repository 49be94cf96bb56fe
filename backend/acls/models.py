from __future__ import annotations

import uuid

from django.db import models

from brokernodes.security.acl import Operation, PatternType, PermissionType, ResourceType


def _choices(enum_cls, *, exclude=()) -> list[tuple[str, str]]:
    return [(m.name, m.name) for m in enum_cls if m.name not in exclude]


RESOURCE_TYPES = _choices(ResourceType)
PATTERN_TYPES = _choices(PatternType, exclude=("ANY", "MATCH"))  # filter-only types
OPERATIONS = _choices(Operation)
PERMISSIONS = _choices(PermissionType)


class AclBinding(models.Model):
    """One ACL binding of an organisation, stored in the canonical form that
    ``brokernodes.security.acl.AclBinding.to_dict`` produces (enum names, canonical host).
    Resource names and principals are the tenant's own: they never reach another tenant."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="acl_bindings"
    )
    principal = models.CharField(max_length=200)
    host = models.CharField(max_length=64, default="*")
    resource_type = models.CharField(max_length=16, choices=RESOURCE_TYPES)
    resource_name = models.CharField(max_length=255)
    pattern_type = models.CharField(max_length=16, choices=PATTERN_TYPES, default="LITERAL")
    operation = models.CharField(max_length=32, choices=OPERATIONS)
    permission = models.CharField(max_length=8, choices=PERMISSIONS, default="ALLOW")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["resource_type", "resource_name", "principal", "operation"]
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "organisation",
                    "principal",
                    "host",
                    "resource_type",
                    "resource_name",
                    "pattern_type",
                    "operation",
                    "permission",
                ],
                name="uniq_acl_binding",
            )
        ]

    BINDING_FIELDS = (
        "principal",
        "host",
        "resource_type",
        "resource_name",
        "pattern_type",
        "operation",
        "permission",
    )

    def as_dict(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in self.BINDING_FIELDS}
