"""Deactivating a tenant stops every key and session at once and keeps its data; reactivating
brings the usable keys back; the other tenant is untouched."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from backend.audit.models import AuditEvent
from backend.cluster import metadata_log
from backend.keys.signals import api_key_revoked
from backend.keys.tokens import broker_key_id
from backend.tenancy import roles
from backend.topics.models import Topic

from .conftest import key_client, session_client


def _broker_keys() -> dict:
    """The API keys a broker would hold after reading the whole metadata log."""
    return {r["key"]: r["value"] for r in metadata_log.image().records if r["kind"] == "api_key"}


def _key_id(tenant, role):
    return broker_key_id(tenant.keys[role].api_key.key_id)


@pytest.mark.django_db(transaction=True)
def test_deactivate_then_activate(world):
    a, b = world.a, world.b
    revoked = []

    def on_revoked(sender, key_id, organisation_id, **kw):
        revoked.append((key_id, organisation_id))

    api_key_revoked.connect(on_revoked)
    try:
        out = StringIO()
        call_command("organisation", "deactivate", "alpha", "--reason", "unpaid", stdout=out)
    finally:
        api_key_revoked.disconnect(on_revoked)
    assert "is deactivated" in out.getvalue()

    # brokers lose every alpha key (tombstones in the metadata log); bravo keeps its own
    held = _broker_keys()
    assert not any(_key_id(a, r) in held for r in a.keys)
    assert all(_key_id(b, r) in held for r in b.keys)
    # open WebSockets of alpha's keys are told to close
    assert {k for k, _ in revoked} == {k.api_key.key_id for k in a.keys.values()}
    assert {o for _, o in revoked} == {a.org.pk}

    # the control plane refuses alpha's keys and sessions; bravo works
    assert key_client(a.token(roles.ADMIN)).get("/api/v1/topics/").status_code in (401, 403)
    owner = session_client(a.users[roles.OWNER], a.org)
    assert owner.get("/api/v1/topics/").status_code in (401, 403, 404)
    assert a.org.slug not in owner.get("/api/v1/me/").content.decode()
    assert key_client(b.token(roles.ADMIN)).get("/api/v1/topics/").status_code == 200

    # nothing is deleted
    assert Topic.objects.filter(organisation=a.org).count() == 1
    assert AuditEvent.objects.filter(organisation=a.org, action="organisation.deactivate").exists()

    # idempotent, then reactivation brings every usable key back
    call_command("organisation", "deactivate", "alpha", stdout=StringIO())
    assert AuditEvent.objects.filter(action="organisation.deactivate").count() == 1
    call_command("organisation", "activate", "alpha", stdout=StringIO())
    held = _broker_keys()
    assert all(_key_id(a, r) in held for r in a.keys)
    assert key_client(a.token(roles.ADMIN)).get("/api/v1/topics/").status_code == 200


@pytest.mark.django_db
def test_unknown_organisation_is_a_clear_error():
    with pytest.raises(CommandError, match="no organisation with slug 'nope'"):
        call_command("organisation", "deactivate", "nope", stdout=StringIO())
