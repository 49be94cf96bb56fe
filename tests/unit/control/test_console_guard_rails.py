"""Guard rails: the console's own service account cannot be deleted or deactivated (API and
console alike, with a reason the list carries), and a key's "last used" follows its use on
the brokers (their heartbeats' ``keys_used``) at one row write a minute at most."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from backend.cluster.models import Broker
from backend.console import credentials
from backend.keys.models import ApiKey
from backend.keys.services import api_keys_used
from backend.keys.tokens import broker_key_id
from backend.tenancy import roles
from backend.tenancy.models import ServiceAccount

from .conftest import key_client, session_client


def _console_account(org) -> ServiceAccount:
    credentials.console_token(org)
    return ServiceAccount.objects.get(organisation=org, name=credentials.CONSOLE_SERVICE_ACCOUNT)


@pytest.mark.parametrize("via", ["console", "api key"])
def test_console_account_cannot_be_deleted_or_deactivated(world, via):
    sa = _console_account(world.a.org)
    client = (
        session_client(world.a.users[roles.OWNER], world.a.org)
        if via == "console"
        else key_client(world.a.token(roles.ADMIN))
    )
    url = f"/api/v1/service-accounts/{sa.id}"
    r = client.delete(url)
    assert r.status_code == 409, r.content
    assert r.json()["error_code"] == "PROTECTED_SERVICE_ACCOUNT"
    assert "cannot be deleted" in r.json()["message"] and "console" in r.json()["message"]
    r = client.patch(url, {"is_active": False}, format="json")
    assert r.status_code == 409 and r.json()["error_code"] == "PROTECTED_SERVICE_ACCOUNT"
    assert "cannot be deactivated" in r.json()["message"]
    sa.refresh_from_db()
    assert sa.is_active
    # the description may change; the list says why the account is protected
    r = client.patch(url, {"description": "the console"}, format="json")
    assert r.status_code == 200 and r.json()["protected"]
    listed = {s["name"]: s for s in client.get("/api/v1/service-accounts/").json()}
    assert "console" in listed[credentials.CONSOLE_SERVICE_ACCOUNT]["protected"]
    other = listed[world.a.accounts[roles.MEMBER].name]
    assert other["protected"] is None
    r = client.patch(f"/api/v1/service-accounts/{other['id']}", {"is_active": False}, "json")
    assert r.status_code == 200 and r.json()["is_active"] is False


def test_keys_used_on_brokers_update_last_used_once_a_minute(world):
    key = world.a.keys[roles.MEMBER].api_key
    other = world.b.keys[roles.MEMBER].api_key
    assert ApiKey.objects.get(pk=key.pk).last_used_at is None
    # the brokers name keys as their bearer parser sees them: slk_<key_id>
    used = broker_key_id(key.key_id)
    assert api_keys_used(key_ids=[key.key_id, "static-key", "slk_nosuchkey", used]) == 1
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None and timezone.now() - first < timedelta(seconds=5)
    assert api_keys_used(key_ids=[used]) == 0  # within the minute: no write
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(seconds=61))
    assert api_keys_used(key_ids=[used]) == 1
    assert ApiKey.objects.get(pk=other.pk).last_used_at is None  # not named, not touched

    # through a broker's heartbeat
    Broker.objects.create(broker_id=1, url="http://127.0.0.1:1", last_heartbeat_at=timezone.now())
    broker = APIClient()
    broker.credentials(HTTP_AUTHORIZATION=f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    r = broker.post(
        "/internal/v1/brokers/heartbeat",
        {"broker_id": 1, "metadata_version": 1, "keys_used": [broker_key_id(other.key_id)]},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert ApiKey.objects.get(pk=other.pk).last_used_at is not None
    # the keys list shows it
    admin = session_client(world.b.users[roles.ADMIN], world.b.org)
    keys = {k["key_id"]: k for k in admin.get("/api/v1/api-keys/").json()}
    assert keys[other.key_id]["last_used_at"] is not None
