"""API keys: format, hashing, shown once, revocation at once, last-used throttle, no leaks."""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from backend.keys import tokens
from backend.keys.models import ApiKey
from backend.keys.signals import api_key_revoked
from backend.tenancy import roles
from brokernodes.security.redaction import RedactSecretsFilter, redact

from .conftest import key_client


def test_token_format_and_parse():
    key_id, secret = tokens.new_key_id(), tokens.new_secret()
    assert len(key_id) == 16 and len(secret) == 43
    token = tokens.format_token(key_id, secret)
    assert token.startswith("slk_")
    assert tokens.parse_token(token) == (key_id, secret)
    assert tokens.broker_key_id(key_id) == token.partition(".")[0]
    for bad in ("", "slk_short.x", token + "!", token.replace("slk_", "sk_"), key_id):
        assert tokens.parse_token(bad) is None


def _create(client, world, role=roles.MEMBER):
    response = client.post(
        "/api/v1/api-keys/",
        {"service_account_id": str(world.a.accounts[role].id), "description": "ci"},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response


def test_secret_shown_once_and_stored_hashed(world, a_admin):
    body = _create(a_admin, world).json()
    token = body["key"]
    key_id, secret = tokens.parse_token(token)
    assert body["key_id"] == key_id and body["prefix"] == f"slk_{key_id}"
    stored = ApiKey.objects.get(pk=key_id)
    assert stored.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(ApiKey.objects.filter(pk=key_id).values().first())
    # Never again: list, retrieve, audit log.
    for url in ("/api/v1/api-keys/", f"/api/v1/api-keys/{key_id}", "/api/v1/audit"):
        text = a_admin.get(url).content.decode()
        assert key_id in text
        assert secret not in text
    # And the new key works.
    assert key_client(token).get("/api/v1/topics/").status_code == 200


def test_revocation_is_effective_at_once(world, a_admin, django_capture_on_commit_callbacks):
    received = []
    api_key_revoked.connect(lambda sender, **kw: received.append(kw), weak=False)
    token = _create(a_admin, world).json()["key"]
    client = key_client(token)
    assert client.get("/api/v1/topics/").status_code == 200
    key_id = tokens.parse_token(token)[0]
    with django_capture_on_commit_callbacks(execute=True):
        assert a_admin.delete(f"/api/v1/api-keys/{key_id}").status_code == 204
    assert received[-1] == {
        "key_id": key_id,
        "organisation_id": world.a.org.id,
        "signal": api_key_revoked,
    }
    response = client.get("/api/v1/topics/")
    assert response.status_code == 401
    assert response.json()["error_code"] == "NOT_AUTHENTICATED"
    assert a_admin.get(f"/api/v1/api-keys/{key_id}").json()["revoked_at"] is not None


def test_deactivated_service_account_and_organisation_keys_fail(world):
    client = key_client(world.a.token(roles.MEMBER))
    sa = world.a.accounts[roles.MEMBER]
    sa.is_active = False
    sa.save()
    assert client.get("/api/v1/topics/").status_code == 401
    client = key_client(world.a.token(roles.ADMIN))
    world.a.org.is_active = False
    world.a.org.save()
    assert client.get("/api/v1/topics/").status_code == 401


def test_wrong_secret_and_malformed_headers_are_401(world):
    token = world.a.token(roles.MEMBER)
    key_id, secret = tokens.parse_token(token)
    wrong = tokens.format_token(key_id, tokens.new_secret())
    for header in (
        f"Bearer {wrong}",
        "Bearer",
        "Bearer a b",
        f"Bearer {key_id}.{secret}",
        "Bearer slk_\u00e9",
        f"bearer  {wrong}",
    ):
        from rest_framework.test import APIClient

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        response = client.get("/api/v1/topics/")
        assert response.status_code == 401, header
        assert secret not in response.content.decode()


def test_last_used_is_throttled(world):
    client = key_client(world.a.token(roles.MEMBER))
    key = world.a.keys[roles.MEMBER].api_key
    assert ApiKey.objects.get(pk=key.pk).last_used_at is None
    client.get("/api/v1/topics/")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    client.get("/api/v1/topics/")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first  # within the minute
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    client.get("/api/v1/topics/")
    assert ApiKey.objects.get(pk=key.pk).last_used_at > first


def test_secrets_never_reach_the_logs(world, a_admin, caplog):
    caplog.set_level(logging.DEBUG)
    token = _create(a_admin, world).json()["key"]
    secret = tokens.parse_token(token)[1]
    key_client(token).get("/api/v1/topics/")
    key_client(token).get("/api/v1/no-such-route")
    key_client(token[:-2] + "zz").get("/api/v1/topics/")  # failed authentication is logged
    a_admin.delete(f"/api/v1/api-keys/{tokens.parse_token(token)[0]}")
    key_client(token).post("/api/v1/topics/", {"name": "x"}, format="json")
    assert caplog.records, "expected some log records (e.g. django.request warnings)"
    assert secret not in caplog.text
    assert secret[:-2] not in caplog.text


def test_redaction_filter_scrubs_tokens_in_messages_and_args():
    token = tokens.format_token(tokens.new_key_id(), tokens.new_secret())
    key_id, secret = tokens.parse_token(token)
    assert redact(f"got {token}!") == f"got slk_{key_id}.[REDACTED]!"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "header %s", (token,), None)
    assert RedactSecretsFilter().filter(record)
    assert secret not in record.getMessage() and f"slk_{key_id}" in record.getMessage()
    try:
        raise ValueError(f"bad key {token}")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    RedactSecretsFilter().filter(record)
    assert secret not in logging.Formatter().format(record)


@pytest.mark.parametrize("role", [roles.MEMBER, roles.READ_ONLY])
def test_non_admin_keys_cannot_mint_keys(world, role):
    response = key_client(world.a.token(role)).post(
        "/api/v1/api-keys/",
        {"service_account_id": str(world.a.accounts[roles.ADMIN].id)},
        format="json",
    )
    assert response.status_code == 403
