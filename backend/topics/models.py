from __future__ import annotations

import uuid

from django.db import models


class Topic(models.Model):
    """A topic. ``topic_id`` is new on every creation, so a re-created name never reads the
    old topic's data; ``name`` is unique within the organisation only. ``configs`` holds only
    the overrides, as Kafka config names mapped to strings (``{"retention.ms": "3600000"}``).
    """

    organisation = models.ForeignKey(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="topics"
    )
    topic_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=249)
    partitions = models.PositiveIntegerField()
    replication_factor = models.PositiveSmallIntegerField()
    configs = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "name"], name="uniq_topic_name")
        ]

    def __str__(self) -> str:
        return self.name
