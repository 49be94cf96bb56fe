"""Fixtures of the control-plane tests: two tenants (A and B) with people, service accounts
and keys of every role, and one of every kind of object in each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from backend.acls.services import acl_create
from backend.core.context import RequestContext
from backend.keys.services import api_key_create
from backend.quotas.selectors import quota_for_organisation
from backend.quotas.services import quota_create_for_service_account
from backend.tenancy import roles
from backend.tenancy.models import Membership
from backend.tenancy.services import (
    invitation_create,
    organisation_create,
    service_account_create,
)
from backend.topics.services import topic_create


@dataclass
class Tenant:
    org: Any
    users: dict[str, Any] = field(default_factory=dict)  # role -> user
    memberships: dict[str, Any] = field(default_factory=dict)  # role -> membership
    accounts: dict[str, Any] = field(default_factory=dict)  # role -> service account
    keys: dict[str, Any] = field(default_factory=dict)  # role -> CreatedApiKey
    topic: Any = None
    acl: Any = None
    invitation: Any = None
    org_quota: Any = None
    sa_quota: Any = None

    def token(self, role: str) -> str:
        return self.keys[role].token

    def identifiers(self) -> list[str]:
        """Strings that must never appear in another tenant's responses."""
        ids = [str(self.org.id), self.org.slug, self.topic.name, str(self.topic.topic_id)]
        ids += [str(self.acl.id), str(self.org_quota.id), str(self.sa_quota.id)]
        ids += [str(sa.id) for sa in self.accounts.values()]
        ids += [sa.name for sa in self.accounts.values()]
        ids += [k.api_key.key_id for k in self.keys.values()]
        ids += [str(m.id) for m in self.memberships.values()]
        ids += [u.username for u in self.users.values()]
        ids += [str(self.invitation.id), self.invitation.username]
        return ids


def make_tenant(slug: str) -> Tenant:
    User = get_user_model()
    owner = User.objects.create_user(username=f"{slug}-owner", password="pw-" + slug)
    org = organisation_create(
        ctx=RequestContext.system(), slug=slug, name=slug.upper(), owner=owner
    )
    t = Tenant(org=org)
    t.users[roles.OWNER] = owner
    t.memberships[roles.OWNER] = Membership.objects.get(organisation=org, user=owner)
    ctx = RequestContext.system(org, role=roles.OWNER)
    for role in (roles.ADMIN, roles.MEMBER, roles.READ_ONLY):
        user = User.objects.create_user(username=f"{slug}-{role}", password="pw-" + slug)
        t.users[role] = user
        t.memberships[role] = Membership.objects.create(organisation=org, user=user, role=role)
        sa = service_account_create(ctx=ctx, name=f"{slug}-sa-{role}", role=role)
        t.accounts[role] = sa
        t.keys[role] = api_key_create(ctx=ctx, service_account=sa)
    t.topic = topic_create(
        ctx=ctx,
        name=f"{slug}-orders",
        partitions=3,
        replication_factor=1,
        configs={"retention.ms": "3600000"},
    )
    t.acl = acl_create(
        ctx=ctx,
        principal=t.accounts[roles.MEMBER].principal,
        host="*",
        resource_type="TOPIC",
        resource_name=f"{slug}-",
        pattern_type="PREFIXED",
        operation="READ",
        permission="ALLOW",
    )
    t.invitation = invitation_create(ctx=ctx, username=f"{slug}-invitee", role=roles.MEMBER)
    t.org_quota = quota_for_organisation(organisation=org)
    t.sa_quota = quota_create_for_service_account(
        ctx=ctx, service_account=t.accounts[roles.READ_ONLY], values={"produce_bytes_per_sec": 1000}
    )
    return t


@dataclass
class World:
    a: Tenant
    b: Tenant
    staff: Any


@pytest.fixture
def world(db) -> World:
    staff = get_user_model().objects.create_user(
        username="platform-staff", password="pw-staff", is_staff=True
    )
    return World(a=make_tenant("alpha"), b=make_tenant("bravo"), staff=staff)


def key_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def session_client(user, organisation=None) -> APIClient:
    client = APIClient()
    client.force_login(user)
    if organisation is not None:
        client.credentials(HTTP_X_SLUICE_ORGANISATION=str(organisation.id))
    return client


@pytest.fixture
def a_admin(world) -> APIClient:
    return key_client(world.a.token(roles.ADMIN))


@pytest.fixture
def a_owner(world) -> APIClient:
    return session_client(world.a.users[roles.OWNER], world.a.org)
