from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from backend.tenancy import roles

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$",
    "1-40 of a-z, 0-9 and '-', not starting or ending with '-'",
)


class Organisation(models.Model):
    """A tenant. ``slug`` is immutable: it namespaces the tenant's resources on the brokers."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A console user's role in one organisation."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=roles.MEMBERSHIP_ROLES)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "user"], name="uniq_membership")
        ]


class ServiceAccount(models.Model):
    """A machine identity in one organisation; its API keys authenticate as it.

    Its Kafka-style principal is ``User:<name>`` within the organisation (ACLs name it so).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="service_accounts"
    )
    name = models.CharField(
        max_length=64,
        validators=[
            RegexValidator(r"^[A-Za-z0-9._-]{1,64}$", "letters, digits, '.', '_' and '-' only")
        ],
    )
    description = models.CharField(max_length=500, blank=True, default="")
    role = models.CharField(
        max_length=16, choices=roles.SERVICE_ACCOUNT_ROLES, default=roles.MEMBER
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "name"], name="uniq_service_account_name"
            )
        ]

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def __str__(self) -> str:
        return self.name


class LoginFailure(models.Model):
    """Failed sign-ins in a row for one username (known or not: the lockout must not tell
    which names exist), and until when the name is locked (``backend.tenancy.lockout``)."""

    username = models.CharField(max_length=150, primary_key=True)
    failures = models.PositiveIntegerField(default=0)
    last_failure_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)


class Invitation(models.Model):
    """An organisation's offer of a role to a username, pending until that person accepts or
    declines it, an admin revokes it, or it expires. Stored for any name, whether a user has
    it or not, so inviting never tells an admin which names exist; only the person signed in
    under that name sees and answers it (``backend.tenancy.services.invitation_*``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="invitations"
    )
    username = models.CharField(max_length=150)
    role = models.CharField(max_length=16, choices=roles.MEMBERSHIP_ROLES)
    invited_by = models.CharField(max_length=200, help_text="the inviter's actor label")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "username"], name="uniq_invitation")
        ]
