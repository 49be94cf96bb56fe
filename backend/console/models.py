from __future__ import annotations

from django.db import models


class ConsolePolicy(models.Model):
    """An organisation's console policy. No row means the defaults (export allowed)."""

    organisation = models.OneToOneField(
        "tenancy.Organisation", on_delete=models.CASCADE, related_name="console_policy"
    )
    allow_export = models.BooleanField(
        default=True, help_text="whether the message browser may export records (JSON/CSV)"
    )
    updated_at = models.DateTimeField(auto_now=True)
