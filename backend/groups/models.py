from __future__ import annotations

import uuid

from django.db import models


class OffsetReset(models.Model):
    """An applied offset reset of a consumer group, kept so it can be undone: ``plan`` holds
    per partition the offset before (``current``, null when there was none) and after
    (``target``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="offset_resets"
    )
    group_id = models.CharField(max_length=249)
    topic = models.CharField(max_length=249)
    strategy = models.CharField(max_length=20)
    value = models.JSONField(null=True, blank=True)
    plan = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organisation", "group_id"])]

    def __str__(self) -> str:
        return f"{self.group_id} {self.strategy} {self.created_at:%Y-%m-%d %H:%M}"
