from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

# Every limit; None means unlimited (an organisation) or "the organisation's" (an account).
QUOTA_FIELDS = (
    "produce_bytes_per_sec",
    "fetch_bytes_per_sec",
    "request_rate",
    "storage_bytes",
    "max_topics",
    "max_partitions",
    "max_connections",
    "max_consumer_instances",
    "max_streams",
)


class Quota(models.Model):
    """Limits of an organisation (``service_account`` null) or of one of its service accounts.

    Byte rates and the request rate are per second and enforced by brokers (throttling);
    storage by brokers (produce refused while over); topic and partition counts by the
    control plane when topics are created or grown; connections by brokers, and so are the
    REST consumer instances and WebSocket streams one broker holds (null: the broker's
    per-tenant default, ``brokernodes.server.tenant_caps``).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="quotas"
    )
    service_account = models.OneToOneField(
        "tenancy.ServiceAccount",
        on_delete=models.CASCADE,
        related_name="quota",
        null=True,
        blank=True,
    )
    produce_bytes_per_sec = models.BigIntegerField(null=True, blank=True)
    fetch_bytes_per_sec = models.BigIntegerField(null=True, blank=True)
    request_rate = models.IntegerField(null=True, blank=True)
    storage_bytes = models.BigIntegerField(null=True, blank=True)
    max_topics = models.IntegerField(null=True, blank=True)
    max_partitions = models.IntegerField(null=True, blank=True)
    max_connections = models.IntegerField(null=True, blank=True)
    max_consumer_instances = models.IntegerField(null=True, blank=True)
    max_streams = models.IntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["service_account__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation"],
                condition=Q(service_account__isnull=True),
                name="uniq_organisation_quota",
            )
        ]

    @property
    def scope(self) -> str:
        return "organisation" if self.service_account_id is None else "service_account"

    def limits(self) -> dict[str, int | None]:
        return {f: getattr(self, f) for f in QUOTA_FIELDS}
