"""Two tenants (alpha, bravo) with API keys of every role and a topic each, and two
registered brokers: the world the Confluent REST Proxy tests call into with Django's test
client (the real views, services and database)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from backend.cluster import services as cluster
from backend.core.context import RequestContext
from backend.keys.services import api_key_create
from backend.tenancy import roles
from backend.tenancy.services import organisation_create, service_account_create
from backend.topics.services import topic_create

ROLES = (roles.ADMIN, roles.MEMBER, roles.READ_ONLY)


@dataclass
class Tenant:
    org: Any
    ctx: RequestContext
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, role: str = roles.ADMIN) -> ConfluentClient:
        return ConfluentClient(self.tokens[role])


class ConfluentClient:
    """Django's test client with a Bearer key; JSON bodies; answers as (status, doc)."""

    def __init__(self, token: str | None) -> None:
        self.http = APIClient()
        if token:
            self.http.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(self, method: str, path: str, body: Any = None, **headers: str):
        kwargs: dict[str, Any] = {}
        if body is not None:
            data = body if isinstance(body, str) else json.dumps(body)
            kwargs = {"data": data, "content_type": "application/json"}
        response = getattr(self.http, method.lower())(path, **kwargs, **headers)
        doc = json.loads(response.content) if response.content else None
        return response.status_code, doc, response

    def get(self, path: str, **headers: str):
        return self.call("GET", path, **headers)


def make_tenant(slug: str) -> Tenant:
    owner = get_user_model().objects.create_user(username=f"{slug}-owner", password="pw")
    org = organisation_create(ctx=RequestContext.system(), slug=slug, name=slug, owner=owner)
    ctx = RequestContext.system(org, role=roles.OWNER)
    t = Tenant(org=org, ctx=ctx)
    for role in ROLES:
        sa = service_account_create(ctx=ctx, name=f"{slug}-{role}", role=role)
        t.tokens[role] = api_key_create(ctx=ctx, service_account=sa).token
    topic_create(
        ctx=ctx,
        name=f"{slug}-orders",
        partitions=3,
        replication_factor=2,
        configs={"retention.ms": "3600000"},
    )
    return t


@dataclass
class World:
    alpha: Tenant
    bravo: Tenant
    cluster_id: str

    @property
    def v3(self) -> str:
        return f"/v3/clusters/{self.cluster_id}"


@pytest.fixture(name="world")
def world_fixture(db) -> World:
    """Import this into a test module to use the ``world`` fixture."""
    cluster.broker_register(broker_id=1, url="http://127.0.0.1:9091", kafka="127.0.0.1:19091")
    cluster.broker_register(broker_id=2, url="http://127.0.0.1:9092")
    return World(make_tenant("alpha"), make_tenant("bravo"), settings.SLUICE_CLUSTER_ID)
