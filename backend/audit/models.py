from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """An immutable record of one change. ``before``/``after`` never hold secrets."""

    organisation = models.ForeignKey(
        "tenancy.Organisation",
        on_delete=models.CASCADE,
        related_name="audit_events",
        null=True,
        blank=True,
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    actor_service_account = models.ForeignKey(
        "tenancy.ServiceAccount", on_delete=models.SET_NULL, null=True, blank=True
    )
    actor = models.CharField(max_length=200)  # label kept after the actor row is gone
    api_key_id = models.CharField(max_length=32, blank=True, default="")
    action = models.CharField(max_length=64, db_index=True)  # e.g. "topic.create"
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=255, blank=True, default="")
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=512, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organisation", "-created_at"])]
