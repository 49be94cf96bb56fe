"""Reads of organisations, memberships, invitations and service accounts, always scoped by
organisation (or, for a person's own invitations, by their username)."""

from __future__ import annotations

import re
import uuid

from django.db.models import QuerySet
from django.utils import timezone

from backend.core.exceptions import NotFound
from backend.tenancy.models import Invitation, Membership, Organisation, ServiceAccount

SLUG = re.compile(r"[a-z0-9-]{1,40}")


def _as_uuid(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def organisation_lookup(ref: str) -> Organisation | None:
    """An active organisation by id (UUID) or slug; None when there is none."""
    qs = Organisation.objects.filter(is_active=True)
    as_id = _as_uuid(ref)
    if as_id is not None:
        return qs.filter(pk=as_id).first()
    if not isinstance(ref, str) or not SLUG.fullmatch(ref):
        return None  # never send arbitrary header bytes to the database
    return qs.filter(slug=ref).first()


def membership_list_for_user(*, user) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, organisation__is_active=True).select_related(
        "organisation"
    )


def membership_for(*, user, organisation: Organisation) -> Membership | None:
    return Membership.objects.filter(user=user, organisation=organisation).first()


def membership_list(*, organisation: Organisation) -> QuerySet[Membership]:
    return Membership.objects.filter(organisation=organisation).select_related("user")


def membership_get(*, organisation: Organisation, membership_id) -> Membership:
    pk = _as_uuid(membership_id)
    m = membership_list(organisation=organisation).filter(pk=pk).first() if pk else None
    if m is None:
        raise NotFound("no such member in this organisation")
    return m


def invitation_list(*, organisation: Organisation) -> QuerySet[Invitation]:
    """The organisation's pending (unexpired) invitations."""
    return Invitation.objects.filter(organisation=organisation, expires_at__gt=timezone.now())


def invitation_get(*, organisation: Organisation, invitation_id) -> Invitation:
    pk = _as_uuid(invitation_id)
    inv = invitation_list(organisation=organisation).filter(pk=pk).first() if pk else None
    if inv is None:
        raise NotFound("no such invitation in this organisation")
    return inv


def invitation_list_for_user(*, user) -> QuerySet[Invitation]:
    """Pending invitations addressed to the signed-in person's username, from active
    organisations."""
    return Invitation.objects.filter(
        username=user.get_username(),
        expires_at__gt=timezone.now(),
        organisation__is_active=True,
    ).select_related("organisation")


def service_account_list(*, organisation: Organisation) -> QuerySet[ServiceAccount]:
    return ServiceAccount.objects.filter(organisation=organisation)


def service_account_get(*, organisation: Organisation, service_account_id) -> ServiceAccount:
    pk = _as_uuid(service_account_id)
    sa = service_account_list(organisation=organisation).filter(pk=pk).first() if pk else None
    if sa is None:
        raise NotFound("no such service account in this organisation")
    return sa
