"""Every operation in the OpenAPI schema, as an admin key, an owner's session and platform
staff, with hostile inputs (``bad_input_walk``): 4xx with a stable error code, never a 5xx;
a body over the limit is 413 PAYLOAD_TOO_LARGE."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from backend.tenancy import roles

from .bad_input_walk import cases, operations, problem
from .conftest import key_client, session_client


def _path_values(world) -> dict[str, str]:
    a = world.a
    return {
        "acl_id": str(a.acl.id),
        "key_id": a.keys[roles.MEMBER].api_key.key_id,
        "name": a.topic.name,
        "group_id": "g1",
        "reset_id": "00000000-0000-0000-0000-000000000000",
        "membership_id": str(a.memberships[roles.MEMBER].id),
        "organisation": a.org.slug,
        "quota_id": str(a.sa_quota.id),
        "service_account_id": str(a.accounts[roles.MEMBER].id),
    }


def test_the_schema_has_operations_to_walk():
    assert len(operations()) > 50


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=64 * 1024)
@pytest.mark.parametrize("caller", ["admin key", "owner session", "platform staff"])
def test_hostile_inputs_never_answer_5xx(world, caller):
    client = {
        "admin key": lambda: key_client(world.a.token(roles.ADMIN)),
        "owner session": lambda: session_client(world.a.users[roles.OWNER], world.a.org),
        "platform staff": lambda: session_client(world.staff),
    }[caller]()
    problems, seen = [], 0
    for case in cases(_path_values(world), settings.DATA_UPLOAD_MAX_MEMORY_SIZE):
        response = client.generic(
            case.method, case.url, case.body or "", content_type="application/json"
        )
        seen += 1
        why = problem(case, response.status_code, response.content)
        if why:
            problems.append(why)
    assert seen > 200
    assert not problems, "\n".join(problems)


def test_a_key_cannot_delete_its_own_service_account(world):
    own = world.a.accounts[roles.ADMIN]
    client = key_client(world.a.token(roles.ADMIN))
    response = client.delete(f"/api/v1/service-accounts/{own.id}")
    assert response.status_code == 409, response.content
    assert response.json()["error_code"] == "CONFLICT"
    assert client.get(f"/api/v1/service-accounts/{own.id}").status_code == 200
    # a person (or another admin's key) deletes it
    owner = session_client(world.a.users[roles.OWNER], world.a.org)
    assert owner.delete(f"/api/v1/service-accounts/{own.id}").status_code == 204
