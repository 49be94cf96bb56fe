"""Console sessions: CSRF-protected sign-in, me, the organisation switcher, logout."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from backend.tenancy import roles
from backend.tenancy.models import Membership

from .conftest import key_client


def _csrf_client() -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    token = client.get("/api/v1/auth/csrf").json()["csrf_token"]
    return client, token


def test_login_needs_csrf_then_session_works(world):
    client = APIClient(enforce_csrf_checks=True)
    refused = client.post(
        "/api/v1/auth/login", {"username": "alpha-owner", "password": "pw-alpha"}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["error_code"] == "PERMISSION_DENIED"

    client, token = _csrf_client()
    me = client.post(
        "/api/v1/auth/login",
        {"username": "alpha-owner", "password": "pw-alpha"},
        format="json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert me.status_code == 200, me.content
    assert me.json()["username"] == "alpha-owner"
    assert me.json()["organisation"]["slug"] == "alpha"  # the only membership
    assert me.json()["role"] == roles.OWNER
    token = client.cookies["csrftoken"].value  # rotated at login

    assert client.get("/api/v1/topics/").status_code == 200
    # writes need the CSRF token
    no_token = client.post("/api/v1/topics/", {"name": "t1"}, format="json")
    assert no_token.status_code == 403
    ok = client.post("/api/v1/topics/", {"name": "t1"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201

    assert client.post("/api/v1/auth/logout", HTTP_X_CSRFTOKEN=token).status_code == 204
    assert client.get("/api/v1/topics/").status_code == 401


def test_wrong_password(world):
    response = APIClient().post(
        "/api/v1/auth/login", {"username": "alpha-owner", "password": "nope"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_CREDENTIALS"


def test_organisation_switcher(world):
    user = world.a.users[roles.MEMBER]
    Membership.objects.create(organisation=world.b.org, user=user, role=roles.READ_ONLY)
    client = APIClient()
    client.force_login(user)
    needs = client.get("/api/v1/topics/")
    assert needs.status_code == 400 and needs.json()["error_code"] == "ORGANISATION_REQUIRED"
    me = client.get("/api/v1/auth/me").json()
    assert me["organisation"] is None and len(me["memberships"]) == 2

    switched = client.post("/api/v1/auth/organisation", {"organisation": "bravo"}, format="json")
    assert switched.status_code == 200 and switched.json()["role"] == roles.READ_ONLY
    assert [t["name"] for t in client.get("/api/v1/topics/").json()] == ["bravo-orders"]
    # read-only in B, member in A (header wins over the session)
    assert client.post("/api/v1/topics/", {"name": "x"}, format="json").status_code == 403
    in_a = client.post(
        "/api/v1/topics/",
        {"name": "x"},
        format="json",
        HTTP_X_SLUICE_ORGANISATION=str(world.a.org.id),
    )
    assert in_a.status_code == 201

    # removed from B: the session's choice is forgotten, not honoured
    Membership.objects.filter(organisation=world.b.org, user=user).delete()
    assert [t["name"] for t in client.get("/api/v1/topics/").json()] == ["alpha-orders", "x"]


def test_user_without_organisation_and_org_creation(world):
    user = get_user_model().objects.create_user(username="newbie", password="pw")
    client = APIClient()
    client.force_login(user)
    assert client.get("/api/v1/topics/").json()["error_code"] == "ORGANISATION_REQUIRED"
    created = client.post("/api/v1/organisations/", {"slug": "newco", "name": "New"}, format="json")
    assert created.status_code == 201
    assert client.get("/api/v1/organisations/").json()[0]["role"] == roles.OWNER
    assert client.get("/api/v1/quotas/").json()[0]["scope"] == "organisation"
    taken = client.post("/api/v1/organisations/", {"slug": "alpha", "name": "x"}, format="json")
    assert taken.status_code == 409


def test_me_with_an_api_key(world):
    me = key_client(world.a.token(roles.ADMIN)).get("/api/v1/auth/me").json()
    assert me["kind"] == "service_account"
    assert me["organisation"]["slug"] == "alpha" and me["role"] == roles.ADMIN
    mismatch = key_client(world.a.token(roles.ADMIN)).get(
        "/api/v1/topics/", HTTP_X_SLUICE_ORGANISATION="bravo"
    )
    assert mismatch.status_code == 404


def test_role_rules_for_members(world):
    admin = APIClient()
    admin.force_login(world.a.users[roles.ADMIN])
    owner_grant = admin.patch(
        f"/api/v1/members/{world.a.memberships[roles.MEMBER].id}",
        {"role": "owner"},
        format="json",
    )
    assert owner_grant.status_code == 403
    demote_owner = admin.patch(
        f"/api/v1/members/{world.a.memberships[roles.OWNER].id}",
        {"role": "member"},
        format="json",
    )
    assert demote_owner.status_code == 403
    ok = admin.patch(
        f"/api/v1/members/{world.a.memberships[roles.MEMBER].id}",
        {"role": "read-only"},
        format="json",
    )
    assert ok.status_code == 200 and ok.json()["role"] == "read-only"
    owner = APIClient()
    owner.force_login(world.a.users[roles.OWNER])
    last = owner.delete(f"/api/v1/members/{world.a.memberships[roles.OWNER].id}")
    assert last.status_code == 400  # the last owner stays
    # a service account never outranks its creator
    sa = admin.post("/api/v1/service-accounts/", {"name": "ops", "role": "admin"}, format="json")
    assert sa.status_code == 201


def test_model_validation_errors_are_400_not_500(world):
    client = APIClient()
    client.force_login(world.a.users[roles.OWNER])
    response = client.post(
        "/api/v1/organisations/", {"slug": "Upper_Case", "name": "x"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error_code"] == "INVALID_REQUEST"
    assert "slug" in response.json()["fields"]


def test_odd_organisation_headers_are_404_never_500(world):
    client = APIClient()
    client.force_login(world.a.users[roles.OWNER])
    for value in ("a\x00b", "x" * 500, "ALPHA", "00000000-0000-0000-0000-000000000000"):
        response = client.get("/api/v1/topics/", HTTP_X_SLUICE_ORGANISATION=value)
        assert response.status_code == 404, value
    staff = APIClient()
    staff.force_login(world.staff)
    response = staff.get("/api/v1/platform/organisations/a%00b/quota")
    assert response.status_code == 404


def test_sign_in_attempts_are_throttled(world, monkeypatch):
    from django.core.cache import cache
    from rest_framework.throttling import ScopedRateThrottle

    cache.clear()
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "login", "3/min")
    client = APIClient(REMOTE_ADDR="198.51.100.7")
    codes = [
        client.post(
            "/api/v1/auth/login", {"username": "alpha-owner", "password": "guess"}, format="json"
        ).status_code
        for _ in range(4)
    ]
    assert codes == [400, 400, 400, 429]
    last = client.post("/api/v1/auth/login", {"username": "x", "password": "y"}, format="json")
    assert last.json()["error_code"] == "THROTTLED" and "Retry-After" in last
    cache.clear()
