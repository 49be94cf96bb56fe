"""ACL bindings, quotas (tenant admins vs platform staff) and the audit trail."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from backend.acls.selectors import acl_authorizer
from backend.audit.models import AuditEvent
from backend.tenancy import roles

from .conftest import key_client, session_client


def test_acl_crud_with_kafka_validation(world, a_admin):
    created = a_admin.post(
        "/api/v1/acls/",
        {
            "principal": "User:app",
            "resource_type": "topic",
            "resource_name": "foo",
            "pattern_type": "prefixed",
            "operation": "describe_configs",
            "permission": "deny",
            "host": "::1",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["resource_type"], body["pattern_type"], body["operation"], body["permission"]) == (
        "TOPIC",
        "PREFIXED",
        "DESCRIBE_CONFIGS",
        "DENY",
    )
    assert body["host"] == "::1"
    dup = a_admin.post(
        "/api/v1/acls/",
        {
            k: body[k]
            for k in (
                "principal",
                "resource_type",
                "resource_name",
                "pattern_type",
                "operation",
                "permission",
                "host",
            )
        },
        format="json",
    )
    assert dup.status_code == 409
    listed = a_admin.get("/api/v1/acls/?principal=User:app").json()
    assert [a["id"] for a in listed] == [body["id"]]
    assert a_admin.get(f"/api/v1/acls/{body['id']}").status_code == 200
    assert a_admin.delete(f"/api/v1/acls/{body['id']}").status_code == 204
    assert a_admin.get(f"/api/v1/acls/{body['id']}").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"principal": "alice"}, "principal"),
        ({"resource_type": "BROKER"}, "resource_type"),
        ({"operation": "WRITE", "resource_type": "GROUP"}, "operation"),
        ({"pattern_type": "MATCH"}, "pattern_type"),
        ({"host": "example.com"}, "host"),
        ({"resource_name": "bad name"}, "resource_name"),
        ({"permission": "MAYBE"}, "permission"),
    ],
)
def test_acl_field_errors(world, a_admin, body, field):
    full = {
        "principal": "User:a",
        "resource_type": "TOPIC",
        "resource_name": "t",
        "operation": "READ",
        **body,
    }
    response = a_admin.post("/api/v1/acls/", full, format="json")
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_REQUEST"
    assert field in response.json()["fields"]


def test_stored_bindings_drive_the_shared_authorizer(world, a_admin):
    for perm, pattern, name in (("DENY", "PREFIXED", "foo"), ("ALLOW", "LITERAL", "foobar")):
        a_admin.post(
            "/api/v1/acls/",
            {
                "principal": "User:app",
                "resource_type": "TOPIC",
                "resource_name": name,
                "pattern_type": pattern,
                "operation": "READ",
                "permission": perm,
            },
            format="json",
        )
    authz = acl_authorizer(organisation=world.a.org)
    assert not authz.authorize("User:app", "1.2.3.4", "READ", "TOPIC", "foobar")  # deny wins
    assert authz.authorize("User:alpha-sa-member", "1.2.3.4", "READ", "TOPIC", "alpha-x")


def test_service_account_quotas_stay_within_the_organisation(world, a_admin):
    sa = world.a.accounts[roles.MEMBER]
    over = a_admin.post(
        "/api/v1/quotas/", {"service_account_id": str(sa.id), "max_topics": 101}, format="json"
    )
    assert over.status_code == 400 and over.json()["error_code"] == "QUOTA_EXCEEDED"
    assert "max_topics" in over.json()["fields"]
    ok = a_admin.post(
        "/api/v1/quotas/",
        {"service_account_id": str(sa.id), "produce_bytes_per_sec": 1024},
        format="json",
    )
    assert ok.status_code == 201 and ok.json()["scope"] == "service_account"
    quota_id = ok.json()["id"]
    again = a_admin.post("/api/v1/quotas/", {"service_account_id": str(sa.id)}, format="json")
    assert again.status_code == 409
    patched = a_admin.patch(f"/api/v1/quotas/{quota_id}", {"fetch_bytes_per_sec": 5}, format="json")
    assert patched.json()["fetch_bytes_per_sec"] == 5
    negative = a_admin.patch(f"/api/v1/quotas/{quota_id}", {"max_topics": -1}, format="json")
    assert negative.status_code == 400
    assert a_admin.delete(f"/api/v1/quotas/{quota_id}").status_code == 204
    assert a_admin.delete(f"/api/v1/quotas/{world.a.org_quota.id}").status_code == 403


def test_platform_staff_set_organisation_quotas(world):
    staff = session_client(world.staff)
    url = "/api/v1/platform/organisations/alpha/quota"
    response = staff.patch(url, {"max_topics": 500, "storage_bytes": None}, format="json")
    assert response.status_code == 200
    assert response.json()["max_topics"] == 500 and response.json()["storage_bytes"] is None
    assert staff.get("/api/v1/platform/organisations/nope/quota").status_code == 404
    event = AuditEvent.objects.filter(organisation=world.a.org, action="quota.update").get()
    assert event.actor == "user:platform-staff"
    assert event.before["max_topics"] == 100 and event.after["max_topics"] == 500


def test_every_write_is_audited_with_who_and_from_where(world):
    client = APIClient(REMOTE_ADDR="203.0.113.9", HTTP_USER_AGENT="sluice-tests/1.0")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.a.token(roles.ADMIN)}")
    AuditEvent.objects.all().delete()
    client.post("/api/v1/topics/", {"name": "audited"}, format="json")
    client.patch("/api/v1/topics/audited", {"configs": {"retention.ms": 1000}}, format="json")
    client.post("/api/v1/topics/audited/partitions", {"partitions": 2}, format="json")
    client.delete("/api/v1/topics/audited")
    sa = client.post("/api/v1/service-accounts/", {"name": "svc"}, format="json").json()
    client.patch(f"/api/v1/service-accounts/{sa['id']}", {"description": "d"}, format="json")
    key = client.post("/api/v1/api-keys/", {"service_account_id": sa["id"]}, format="json").json()
    client.delete(f"/api/v1/api-keys/{key['key_id']}")
    acl = client.post(
        "/api/v1/acls/",
        {
            "principal": "User:svc",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "READ",
        },
        format="json",
    ).json()
    client.delete(f"/api/v1/acls/{acl['id']}")
    q = client.post(
        "/api/v1/quotas/", {"service_account_id": sa["id"], "max_topics": 1}, format="json"
    ).json()
    client.patch(f"/api/v1/quotas/{q['id']}", {"max_topics": 2}, format="json")
    client.delete(f"/api/v1/quotas/{q['id']}")
    client.post("/api/v1/members/", {"username": "bravo-owner", "role": "member"}, format="json")
    client.patch("/api/v1/organisation", {"name": "Alpha Inc"}, format="json")
    client.delete(f"/api/v1/service-accounts/{sa['id']}")

    page = client.get("/api/v1/audit?limit=100").json()
    actions = [e["action"] for e in reversed(page["results"])]
    assert actions == [
        "topic.create",
        "topic.alter_configs",
        "topic.add_partitions",
        "topic.delete",
        "service_account.create",
        "service_account.update",
        "api_key.create",
        "api_key.revoke",
        "acl.create",
        "acl.delete",
        "quota.create",
        "quota.update",
        "quota.delete",
        "invitation.create",
        "organisation.update",
        "service_account.delete",
    ]
    assert page["count"] == len(actions)
    event = page["results"][0]
    assert event["actor"] == "service-account:alpha-sa-admin"
    assert event["api_key_id"] == world.a.keys[roles.ADMIN].api_key.key_id
    assert event["ip"] == "203.0.113.9" and event["user_agent"] == "sluice-tests/1.0"
    alter = next(e for e in page["results"] if e["action"] == "topic.alter_configs")
    assert alter["before"]["configs"] == {} and alter["after"]["configs"] == {
        "retention.ms": "1000"
    }
    key_event = next(e for e in page["results"] if e["action"] == "api_key.create")
    assert key["key"].split(".")[1] not in str(key_event)
    # filters and pagination
    only = client.get("/api/v1/audit?action=topic.create").json()
    assert only["count"] == 1
    assert len(client.get("/api/v1/audit?limit=2&offset=1").json()["results"]) == 2
    # B's admins never see A's events
    b_events = key_client(world.b.token(roles.ADMIN)).get("/api/v1/audit?limit=500").json()
    assert all(e["actor"] != "service-account:alpha-sa-admin" for e in b_events["results"])
