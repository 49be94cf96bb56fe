"""Error bodies for routes and methods that do not exist, unexpected errors, and seed_demo."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from backend.keys.models import ApiKey
from backend.tenancy.models import Organisation

from .conftest import key_client


def test_unknown_route_is_json_404(world, client):
    response = client.get("/api/v1/nope")
    assert response.status_code == 404
    assert response.json()["error_code"] == "NOT_FOUND"


def test_method_not_allowed_is_json(world, a_owner):
    response = a_owner.put("/api/v1/topics/", {}, format="json")
    assert response.status_code == 405
    assert response.json()["error_code"] == "METHOD_NOT_ALLOWED"


def test_unsupported_media_type_is_json(world, a_owner):
    response = a_owner.post("/api/v1/topics/", "name=x", content_type="text/plain")
    assert response.status_code == 415
    assert response.json()["error_code"] == "UNSUPPORTED_MEDIA_TYPE"


def test_unexpected_errors_are_json_500(world, a_owner, monkeypatch):
    from backend.topics import selectors

    def boom(**kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(selectors, "topic_list", boom)
    response = a_owner.get("/api/v1/topics/")
    assert response.status_code == 500
    assert response.json() == {
        "error_code": "INTERNAL_ERROR",
        "message": "an unexpected error occurred; it has been logged",
    }


@pytest.mark.django_db
def test_seed_demo_prints_a_working_key_once_per_run():
    out = io.StringIO()
    call_command("seed_demo", "--json", "--password", "demo-pass", stdout=out)
    first = json.loads(out.getvalue())
    assert first["organisation"] == "demo" and first["api_key"].startswith("slk_")
    assert key_client(first["api_key"]).get("/api/v1/topics/").status_code == 200
    client = APIClient()
    login = client.post(
        "/api/v1/auth/login", {"username": "demo", "password": "demo-pass"}, format="json"
    )
    assert login.status_code == 200
    out = io.StringIO()
    call_command("seed_demo", stdout=out)  # idempotent; a new key each run
    assert "slk_" in out.getvalue()
    assert Organisation.objects.filter(slug="demo").count() == 1
    assert ApiKey.objects.count() == 2
