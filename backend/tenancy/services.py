"""Writes of organisations, memberships and service accounts; each records an audit event."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.audit.services import audit_record
from backend.cluster import services as cluster
from backend.console.protected import refuse_change
from backend.core.context import RequestContext
from backend.core.exceptions import Conflict, InvalidRequest, NotFound, PermissionDenied
from backend.tenancy import roles
from backend.tenancy.models import Invitation, Membership, Organisation, ServiceAccount


def organisation_snapshot(org: Organisation) -> dict:
    return {"id": str(org.id), "slug": org.slug, "name": org.name, "is_active": org.is_active}


def membership_snapshot(m: Membership) -> dict:
    return {"id": str(m.id), "user": m.user.get_username(), "role": m.role}


def service_account_snapshot(sa: ServiceAccount) -> dict:
    return {
        "id": str(sa.id),
        "name": sa.name,
        "description": sa.description,
        "role": sa.role,
        "is_active": sa.is_active,
    }


@transaction.atomic
def organisation_create(*, ctx: RequestContext, slug: str, name: str, owner) -> Organisation:
    """A new tenant with ``owner`` as its first owner and the default quota."""
    from backend.quotas.services import quota_create_default

    if Organisation.objects.filter(slug=slug).exists():
        raise Conflict("an organisation with this slug exists", {"slug": ["already taken"]})
    org = Organisation(slug=slug, name=name)
    org.full_clean()
    org.save()
    Membership.objects.create(organisation=org, user=owner, role=roles.OWNER)
    ctx = replace(ctx, organisation=org, role=ctx.role or roles.OWNER)
    audit_record(
        ctx=ctx,
        action="organisation.create",
        object_type="organisation",
        object_id=org.id,
        after=organisation_snapshot(org),
    )
    quota_create_default(ctx=ctx, organisation=org)
    return org


@transaction.atomic
def organisation_update(*, ctx: RequestContext, name: str) -> Organisation:
    org = Organisation.objects.select_for_update().get(pk=ctx.organisation.pk)
    before = organisation_snapshot(org)
    org.name = name
    org.full_clean()
    org.save(update_fields=["name"])
    audit_record(
        ctx=ctx,
        action="organisation.update",
        object_type="organisation",
        object_id=org.id,
        before=before,
        after=organisation_snapshot(org),
    )
    return org


@transaction.atomic
def organisation_set_active(
    *, ctx: RequestContext, organisation: Organisation, active: bool, reason: str = ""
) -> Organisation:
    """Deactivate (or reactivate) a tenant: a platform action, e.g. for non-payment or abuse.

    Deactivation keeps every topic, record, key and setting but stops all access at once:
    every API key's hash leaves the metadata log (brokers answer 401 and close the keys' open
    WebSockets on the next delta, as for a revocation), keys and sessions stop authenticating
    in the control plane (``organisation.is_active`` is checked on every request), and the
    organisation disappears from its members' lists. Reactivation republishes the keys that
    are still usable. Idempotent; audited in the organisation's own log.
    """
    org = Organisation.objects.select_for_update().get(pk=organisation.pk)
    if org.is_active == active:
        return org
    before = organisation_snapshot(org)
    org.is_active = active
    org.save(update_fields=["is_active"])
    for sa in org.service_accounts.all():
        cluster.publish_service_account_keys(sa)
    if not active:
        from backend.keys.models import ApiKey
        from backend.keys.signals import api_key_revoked

        key_ids = list(
            ApiKey.objects.filter(organisation=org, revoked_at__isnull=True).values_list(
                "key_id", flat=True
            )
        )
        transaction.on_commit(
            lambda: [
                api_key_revoked.send(sender=ApiKey, key_id=k, organisation_id=org.pk)
                for k in key_ids
            ]
        )
    audit_record(
        ctx=replace(ctx, organisation=org),
        action="organisation.activate" if active else "organisation.deactivate",
        object_type="organisation",
        object_id=org.id,
        before=before,
        after={**organisation_snapshot(org), **({"reason": reason} if reason else {})},
    )
    return org


def _check_can_grant(ctx: RequestContext, role: str) -> None:
    if role == roles.OWNER and ctx.role != roles.OWNER:
        raise PermissionDenied("only an owner can grant or change the owner role")


def invitation_snapshot(inv: Invitation) -> dict:
    return {"id": str(inv.id), "username": inv.username, "role": inv.role}


@transaction.atomic
def invitation_create(*, ctx: RequestContext, username: str, role: str) -> Invitation:
    """Invite ``username`` to the organisation with ``role`` (or renew the pending invitation).

    The answer is the same whether a user has the name or not (no enumeration of the
    service's users): the invitation is stored either way and only a person signed in under
    that name can accept it. Nobody joins an organisation without saying yes; an existing
    member is a 409 (admins see the members anyway).
    """
    _check_can_grant(ctx, role)
    org = ctx.organisation
    if Membership.objects.filter(organisation=org, user__username=username).exists():
        raise Conflict("this user is already a member", {"username": ["already a member"]})
    expires_at = timezone.now() + timedelta(seconds=settings.SLUICE_INVITATION_TTL_S)
    inv, created = Invitation.objects.update_or_create(
        organisation=org,
        username=username,
        defaults={"role": role, "expires_at": expires_at, "invited_by": ctx.actor_label},
    )
    audit_record(
        ctx=ctx,
        action="invitation.create" if created else "invitation.renew",
        object_type="invitation",
        object_id=inv.id,
        after=invitation_snapshot(inv),
    )
    return inv


@transaction.atomic
def invitation_revoke(*, ctx: RequestContext, invitation: Invitation) -> None:
    before = invitation_snapshot(invitation)
    iid = invitation.id
    invitation.delete()
    audit_record(
        ctx=ctx, action="invitation.revoke", object_type="invitation", object_id=iid, before=before
    )


def _own_pending_invitation(user, invitation_id) -> Invitation:
    from backend.tenancy.selectors import invitation_list_for_user

    inv = (
        invitation_list_for_user(user=user).select_for_update().filter(pk=invitation_id).first()
        if invitation_id is not None
        else None
    )
    if inv is None:
        raise NotFound("no such invitation for you (it may have expired or been withdrawn)")
    return inv


@transaction.atomic
def invitation_accept(
    *, user, invitation_id, ip: str | None = None, user_agent: str = ""
) -> Membership:
    """The invited person says yes: they become a member with the invitation's role."""
    inv = _own_pending_invitation(user, invitation_id)
    org = inv.organisation
    m, _ = Membership.objects.get_or_create(
        organisation=org, user=user, defaults={"role": inv.role}
    )
    iid = inv.id
    inv.delete()
    ctx = RequestContext(organisation=org, role=m.role, user=user, ip=ip, user_agent=user_agent)
    audit_record(
        ctx=ctx,
        action="invitation.accept",
        object_type="membership",
        object_id=m.id,
        after={**membership_snapshot(m), "invitation": str(iid)},
    )
    return m


@transaction.atomic
def invitation_decline(*, user, invitation_id, ip: str | None = None, user_agent: str = "") -> None:
    inv = _own_pending_invitation(user, invitation_id)
    before = invitation_snapshot(inv)
    org, iid = inv.organisation, inv.id
    inv.delete()
    ctx = RequestContext(organisation=org, role="", user=user, ip=ip, user_agent=user_agent)
    audit_record(
        ctx=ctx, action="invitation.decline", object_type="invitation", object_id=iid, before=before
    )


def _owner_count(org: Organisation) -> int:
    return Membership.objects.filter(organisation=org, role=roles.OWNER).count()


@transaction.atomic
def membership_update(*, ctx: RequestContext, membership: Membership, role: str) -> Membership:
    _check_can_grant(ctx, role)
    if membership.role == roles.OWNER:
        _check_can_grant(ctx, roles.OWNER)
        if role != roles.OWNER and _owner_count(ctx.organisation) <= 1:
            raise InvalidRequest(
                "an organisation keeps at least one owner", {"role": ["last owner"]}
            )
    before = membership_snapshot(membership)
    membership.role = role
    membership.save(update_fields=["role"])
    audit_record(
        ctx=ctx,
        action="membership.update",
        object_type="membership",
        object_id=membership.id,
        before=before,
        after=membership_snapshot(membership),
    )
    return membership


@transaction.atomic
def membership_delete(*, ctx: RequestContext, membership: Membership) -> None:
    if membership.role == roles.OWNER:
        _check_can_grant(ctx, roles.OWNER)
        if _owner_count(ctx.organisation) <= 1:
            raise InvalidRequest("an organisation keeps at least one owner")
    before = membership_snapshot(membership)
    mid = membership.id
    membership.delete()
    audit_record(
        ctx=ctx, action="membership.delete", object_type="membership", object_id=mid, before=before
    )


@transaction.atomic
def service_account_create(
    *, ctx: RequestContext, name: str, description: str = "", role: str = roles.MEMBER
) -> ServiceAccount:
    if roles.RANK[role] > roles.RANK.get(ctx.role, roles.RANK[roles.OWNER]):
        raise PermissionDenied("a service account cannot get a higher role than yours")
    if ServiceAccount.objects.filter(organisation=ctx.organisation, name=name).exists():
        raise Conflict("a service account with this name exists", {"name": ["already taken"]})
    sa = ServiceAccount(
        organisation=ctx.organisation, name=name, description=description, role=role
    )
    sa.full_clean()
    sa.save()
    audit_record(
        ctx=ctx,
        action="service_account.create",
        object_type="service_account",
        object_id=sa.id,
        after=service_account_snapshot(sa),
    )
    return sa


@transaction.atomic
def service_account_update(
    *, ctx: RequestContext, service_account: ServiceAccount, **changes
) -> ServiceAccount:
    role = changes.get("role")
    if role is not None and roles.RANK[role] > roles.RANK.get(ctx.role, roles.RANK[roles.OWNER]):
        raise PermissionDenied("a service account cannot get a higher role than yours")
    refuse_change(service_account, deactivate=changes.get("is_active") is False)
    before = service_account_snapshot(service_account)
    for field in ("description", "role", "is_active"):
        if field in changes:
            setattr(service_account, field, changes[field])
    service_account.full_clean()
    service_account.save()
    cluster.publish_service_account_keys(service_account)
    audit_record(
        ctx=ctx,
        action="service_account.update",
        object_type="service_account",
        object_id=service_account.id,
        before=before,
        after=service_account_snapshot(service_account),
    )
    return service_account


@transaction.atomic
def service_account_delete(*, ctx: RequestContext, service_account: ServiceAccount) -> None:
    """Deleting a service account deletes (and so revokes) its API keys at once. A key may
    not delete its own account: the request would remove the actor its audit event names
    (another admin, or a person in the console, does it)."""
    if ctx.service_account is not None and ctx.service_account.pk == service_account.pk:
        raise Conflict(
            "an API key cannot delete its own service account; deactivate it "
            "(PATCH is_active=false) or delete it with another admin's key or the console",
            {"service_account_id": ["this is the calling key's own service account"]},
        )
    refuse_change(service_account, delete=True)
    before = service_account_snapshot(service_account)
    sid = service_account.id
    cluster.publish_service_account_keys(service_account, deleted=True)
    service_account.delete()
    audit_record(
        ctx=ctx,
        action="service_account.delete",
        object_type="service_account",
        object_id=sid,
        before=before,
    )
