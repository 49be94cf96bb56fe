"""Undeclared and protected fields are refused with a 400 naming them, never ignored."""

from __future__ import annotations

import pytest

from backend.tenancy import roles


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/api/v1/topics/", {"name": "t", "organisation": "B"}, "organisation"),
        ("post", "/api/v1/topics/", {"name": "t", "topic_id": "x"}, "topic_id"),
        ("patch", "/api/v1/topics/alpha-orders", {"configs": {}, "partitions": 9}, "partitions"),
        ("patch", "/api/v1/topics/alpha-orders", {"configs": {}, "name": "y"}, "name"),
        (
            "post",
            "/api/v1/service-accounts/",
            {"name": "s", "organisation_id": "x"},
            "organisation_id",
        ),
        ("post", "/api/v1/service-accounts/", {"name": "s", "max_topics": 5}, "max_topics"),
        ("post", "/api/v1/api-keys/", {"service_account_id": "SA", "secret": "x"}, "secret"),
        ("post", "/api/v1/api-keys/", {"service_account_id": "SA", "owner": "x"}, "owner"),
        (
            "post",
            "/api/v1/members/",
            {"username": "u", "role": "member", "is_staff": True},
            "is_staff",
        ),
        ("patch", "/api/v1/organisation", {"name": "n", "slug": "other"}, "slug"),
        ("patch", "/api/v1/organisation", {"name": "n", "max_partitions": 10**6}, "max_partitions"),
        (
            "post",
            "/api/v1/acls/",
            {
                "principal": "User:x",
                "resource_type": "TOPIC",
                "resource_name": "t",
                "operation": "READ",
                "organisation": "x",
            },
            "organisation",
        ),
        (
            "post",
            "/api/v1/quotas/",
            {"service_account_id": "SA", "organisation": "x"},
            "organisation",
        ),
        ("patch", "/api/v1/auth/organisation", {}, None),
    ],
)
def test_refused_with_field_named(world, a_owner, method, url, body, field):
    body = {
        k: (str(world.a.accounts[roles.MEMBER].id) if v == "SA" else v) for k, v in body.items()
    }
    response = getattr(a_owner, method)(url, body, format="json")
    if field is None:
        assert response.status_code == 405
        assert response.json()["error_code"] == "METHOD_NOT_ALLOWED"
        return
    assert response.status_code == 400, response.content
    assert response.json()["error_code"] == "INVALID_REQUEST"
    assert field in response.json()["fields"]


def test_quota_fields_cannot_be_raised_by_the_tenant(world, a_owner):
    org_quota = world.a.org_quota
    response = a_owner.patch(f"/api/v1/quotas/{org_quota.id}", {"max_topics": 10**6}, format="json")
    assert response.status_code == 403
    assert response.json()["error_code"] == "PERMISSION_DENIED"
    org_quota.refresh_from_db()
    assert org_quota.max_topics == 100
