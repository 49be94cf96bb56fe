"""Host and principal rules an attacker could slip past: an IPv4-mapped IPv6 host is the IPv4
address it maps (stored and matched), and a principal name never holds a wildcard."""

from __future__ import annotations

import pytest

from brokernodes.security.acl import (
    AclBinding,
    AclBindingFilter,
    Authorizer,
    InvalidAclError,
    validate_binding,
)


def deny_write(host: str) -> AclBinding:
    return AclBinding(
        principal="User:app",
        host=host,
        resource_type="TOPIC",
        resource_name="orders",
        operation="WRITE",
        permission="DENY",
    )


ALLOW_ALL = AclBinding(
    principal="User:app", resource_type="TOPIC", resource_name="*", operation="ALL"
)


@pytest.mark.parametrize("stored", ["::ffff:127.0.0.1", "::FFFF:7f00:1", "0:0:0:0:0:ffff:7f00:1"])
def test_an_ipv4_mapped_binding_is_stored_as_its_ipv4_address(stored):
    assert deny_write(stored).host == "127.0.0.1"
    assert deny_write(stored).to_dict()["host"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("stored", "client"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("127.0.0.1", "::ffff:127.0.0.1"),
        ("::ffff:10.1.2.3", "::ffff:a01:203"),
    ],
)
def test_a_deny_for_either_form_applies_to_the_other(stored, client):
    authorizer = Authorizer([ALLOW_ALL, deny_write(stored)])
    decision = authorizer.authorize("User:app", client, "WRITE", "TOPIC", "orders")
    assert not decision.allowed, decision
    # another address is not denied, and a plain IPv6 address is not an IPv4 one
    assert authorizer.authorize("User:app", "10.9.9.9", "WRITE", "TOPIC", "orders").allowed
    assert authorizer.authorize("User:app", "::1", "WRITE", "TOPIC", "orders").allowed


def test_a_filter_by_the_mapped_form_finds_the_ipv4_binding():
    assert AclBindingFilter(host="::ffff:127.0.0.1").matches(deny_write("127.0.0.1"))


@pytest.mark.parametrize("principal", ["User:*x", "User:x*", "User:a*b", "User:**", "Group:*"])
def test_a_principal_name_with_a_wildcard_is_refused(principal):
    errors = validate_binding(
        principal=principal, resource_type="TOPIC", resource_name="t", operation="READ"
    )
    assert "principal" in errors, errors
    assert "User:*" in errors["principal"][0]
    with pytest.raises(InvalidAclError):
        AclBinding(principal=principal, resource_type="TOPIC", resource_name="t", operation="READ")


@pytest.mark.parametrize("principal", ["User:*", "User:alice", "User:sa-1.prod"])
def test_the_wildcard_and_literal_names_are_accepted(principal):
    assert not validate_binding(
        principal=principal, resource_type="TOPIC", resource_name="t", operation="READ"
    )
