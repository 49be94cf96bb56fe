"""Binding validation (the control plane's 400 field errors) and the bindings' JSON form."""

from __future__ import annotations

import pytest

from brokernodes.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    InvalidAclError,
    Operation,
    PatternType,
    PermissionType,
    ResourceType,
    validate_binding,
)

GOOD = {
    "principal": "User:alice",
    "host": "*",
    "resource_type": "TOPIC",
    "resource_name": "orders",
    "pattern_type": "LITERAL",
    "operation": "READ",
    "permission": "ALLOW",
}


def errors_for(**changes):
    return validate_binding(**{**GOOD, **changes})


def test_a_good_binding_has_no_errors():
    assert errors_for() == {}


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"resource_name": "*", "pattern_type": "PREFIXED"}, "resource_name", "PREFIXED '*'"),
        ({"resource_name": ""}, "resource_name", "empty"),
        ({"resource_name": "", "pattern_type": "PREFIXED"}, "resource_name", "empty"),
        ({"resource_name": None}, "resource_name", "empty"),
        ({"resource_name": "a b"}, "resource_name", "topic name"),
        ({"resource_name": "x" * 250}, "resource_name", "at most 249"),
        ({"resource_type": "GROUP", "operation": "WRITE"}, "operation", "WRITE does not apply"),
        ({"resource_type": "GROUP", "operation": "ALTER_CONFIGS"}, "operation", "GROUP"),
        ({"operation": "IDEMPOTENT_WRITE"}, "operation", "TOPIC"),
        ({"operation": "CLUSTER_ACTION"}, "operation", "TOPIC"),
        (
            {"resource_type": "CLUSTER", "operation": "READ", "resource_name": "kafka-cluster"},
            "operation",
            "READ does not apply",
        ),
        ({"resource_type": "CLUSTER", "operation": "CREATE"}, "resource_name", "kafka-cluster"),
        (
            {
                "resource_type": "CLUSTER",
                "operation": "CREATE",
                "resource_name": "kafka-cluster",
                "pattern_type": "PREFIXED",
            },
            "resource_name",
            "LITERAL",
        ),
        ({"operation": "FLY"}, "operation", "not one of"),
        ({"resource_type": "USER"}, "resource_type", "not one of"),
        ({"pattern_type": "MATCH"}, "pattern_type", "LITERAL or PREFIXED"),
        ({"pattern_type": "ANY"}, "pattern_type", "LITERAL or PREFIXED"),
        ({"permission": "MAYBE"}, "permission", "not one of"),
        ({"principal": "alice"}, "principal", "Type:name"),
        ({"principal": "User:"}, "principal", "non-empty"),
        ({"principal": ":alice"}, "principal", "non-empty"),
        ({"principal": "ServiceAccount:*"}, "principal", "User:*"),
        ({"principal": 7}, "principal", "Type:name"),
        ({"host": "example.com"}, "host", "IP address"),
        ({"host": "10.0.0.0/8"}, "host", "IP address"),
        ({"host": ""}, "host", "IP address"),
    ],
)
def test_field_errors(changes, field, words):
    errors = errors_for(**changes)
    assert field in errors, errors
    assert any(words in message for message in errors[field]), errors


def test_several_fields_reported_at_once():
    errors = validate_binding(
        principal="nobody", host="nohost", resource_type="GROUP", resource_name="",
        operation="WRITE",
    )  # fmt: skip
    assert set(errors) == {"principal", "host", "resource_name", "operation"}


@pytest.mark.parametrize(
    ("rtype", "name"),
    [("TOPIC", "orders"), ("GROUP", "my group/ü"), ("CLUSTER", "kafka-cluster")],
)
def test_all_and_every_supported_operation_are_valid(rtype, name):
    for op in SUPPORTED_OPERATIONS[ResourceType[rtype]]:
        assert errors_for(resource_type=rtype, resource_name=name, operation=op.name) == {}


@pytest.mark.parametrize(
    "changes",
    [
        {"resource_name": "*"},
        {"resource_name": "logs-", "pattern_type": "PREFIXED"},
        {"principal": "User:*"},
        {"principal": "ServiceAccount:sa-1"},
        {"host": "10.0.0.1"},
        {"host": "fe80::1"},
        {"resource_type": "GROUP", "resource_name": "*", "operation": "DELETE"},
        {"operation": "describe_configs", "pattern_type": "prefixed", "permission": "deny"},
        {"operation": "DescribeConfigs"},
    ],
)
def test_valid_variants(changes):
    assert errors_for(**changes) == {}


def test_binding_refuses_invalid_fields_with_field_errors():
    with pytest.raises(InvalidAclError) as exc:
        AclBinding(**{**GOOD, "resource_name": "*", "pattern_type": "PREFIXED"})
    assert set(exc.value.errors) == {"resource_name"}
    assert "resource_name" in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_binding_parses_names_and_canonicalises_host():
    b = AclBinding(**{**GOOD, "operation": "describe-configs", "host": "0:0::1"})
    assert b.operation is Operation.DESCRIBE_CONFIGS
    assert b.resource_type is ResourceType.TOPIC
    assert b.pattern_type is PatternType.LITERAL
    assert b.permission is PermissionType.ALLOW
    assert b.host == "::1"


def test_binding_defaults_are_any_host_literal_allow():
    b = AclBinding(principal="User:a", resource_type="TOPIC", resource_name="t", operation="READ")
    assert (b.host, b.pattern_type, b.permission) == (
        "*",
        PatternType.LITERAL,
        PermissionType.ALLOW,
    )


def test_binding_json_round_trip_and_equality():
    b = AclBinding(**GOOD)
    doc = b.to_dict()
    assert doc == GOOD
    assert AclBinding.from_dict({**doc, "id": 17}) == b
    assert hash(AclBinding.from_dict(doc)) == hash(b)
    with pytest.raises(InvalidAclError) as exc:
        AclBinding.from_dict({"principal": "User:a", "operation": "READ"})
    assert set(exc.value.errors) == {"resource_type", "resource_name"}


def test_binding_is_immutable():
    b = AclBinding(**GOOD)
    with pytest.raises(AttributeError):
        b.principal = "User:mallory"  # type: ignore[misc]
