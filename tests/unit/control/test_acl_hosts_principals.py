"""The control plane stores ACL hosts as the brokers match them (an IPv4-mapped address is its
IPv4 address) and refuses principal names with a wildcard other than ``User:*``."""

from __future__ import annotations

import pytest

BINDING = {
    "principal": "User:app",
    "resource_type": "TOPIC",
    "resource_name": "orders",
    "operation": "WRITE",
    "permission": "DENY",
}


def test_an_ipv4_mapped_host_is_stored_as_ipv4(world, a_admin):
    created = a_admin.post("/api/v1/acls/", {**BINDING, "host": "::ffff:127.0.0.1"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["host"] == "127.0.0.1"
    # the same rule in the other form is the same binding
    dup = a_admin.post("/api/v1/acls/", {**BINDING, "host": "127.0.0.1"}, format="json")
    assert dup.status_code == 409, dup.content
    listed = a_admin.get("/api/v1/acls/?resource_name=orders").json()
    assert [(a["id"], a["host"]) for a in listed] == [(created.json()["id"], "127.0.0.1")]


@pytest.mark.parametrize("principal", ["User:*x", "User:x*", "User:a*b"])
def test_a_wildcard_inside_a_principal_name_is_refused(world, a_admin, principal):
    response = a_admin.post("/api/v1/acls/", {**BINDING, "principal": principal}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error_code"] == "INVALID_REQUEST"
    assert "principal" in body["fields"]
