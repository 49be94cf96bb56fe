from __future__ import annotations

from django.db import models


class ApiKey(models.Model):
    """An API key of a service account. Only ``sha256(secret)`` is stored; see ``tokens``."""

    key_id = models.CharField(max_length=16, primary_key=True)
    organisation = models.ForeignKey(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="api_keys"
    )
    service_account = models.ForeignKey(
        "tenancy.ServiceAccount", on_delete=models.CASCADE, related_name="api_keys"
    )
    secret_sha256 = models.CharField(max_length=64)
    description = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def __str__(self) -> str:
        return f"slk_{self.key_id}"
