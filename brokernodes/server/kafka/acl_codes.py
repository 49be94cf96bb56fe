"""Kafka's numeric ACL vocabulary <-> Sluice's ACL model (``brokernodes.security.acl``), for
DescribeAcls, CreateAcls and DeleteAcls. Pure: no I/O.

Kafka numbers resource types, pattern types, operations and permissions (``ResourceType``,
``PatternType``, ``AclOperation``, ``AclPermissionType`` in its clients); Sluice stores their
names. Sluice knows the TOPIC, GROUP, CLUSTER and TRANSACTIONAL_ID resources: a binding of
another type (DELEGATION_TOKEN, USER) cannot be created, and filters for them match
nothing. Principals are Kafka's ``User:<name>``, the name being the service account's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brokernodes.security.acl import AclBinding, AclBindingFilter

# Kafka's codes (UNKNOWN = 0 and ANY = 1 in every enum)
UNKNOWN = 0
ANY = 1

RESOURCE_TYPES: Mapping[int, str] = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID"}
UNSUPPORTED_RESOURCE_TYPES: Mapping[int, str] = {
    6: "DELEGATION_TOKEN",
    7: "USER",
}
PATTERN_TYPES: Mapping[int, str] = {2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS: Mapping[int, str] = {
    2: "ALL",
    3: "READ",
    4: "WRITE",
    5: "CREATE",
    6: "DELETE",
    7: "ALTER",
    8: "DESCRIBE",
    9: "CLUSTER_ACTION",
    10: "DESCRIBE_CONFIGS",
    11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE",
}
PERMISSIONS: Mapping[int, str] = {2: "DENY", 3: "ALLOW"}

_CODE_OF = {
    "resource_type": {v: k for k, v in RESOURCE_TYPES.items()},
    "pattern_type": {v: k for k, v in PATTERN_TYPES.items()},
    "operation": {v: k for k, v in OPERATIONS.items()},
    "permission": {v: k for k, v in PERMISSIONS.items()},
}


class AclRequestError(ValueError):
    """A creation or filter Sluice cannot take (the message says why)."""


def code_of(field: str, name: str) -> int:
    """Kafka's code for a stored binding's enum name (``UNKNOWN`` if none)."""
    return _CODE_OF[field].get(str(name).upper(), UNKNOWN)


def operation_bit(name: str) -> int:
    """The bit of an operation in Kafka's ``authorized_operations`` bit fields."""
    return 1 << code_of("operation", name)


def binding_from_creation(creation: Mapping[str, Any]) -> dict[str, str]:
    """A CreateAcls ``AclCreation`` as the control plane's ACL body; raises
    :class:`AclRequestError` for a type Sluice does not have or ANY/UNKNOWN where a binding
    needs a specific value (the control plane checks the rest)."""

    def specific(field: str, table: Mapping[int, str], code: int, what: str) -> str:
        name = table.get(code)
        if name is None or name == "MATCH":
            other = UNSUPPORTED_RESOURCE_TYPES.get(code) if field == "resource_type" else None
            if other:
                raise AclRequestError(
                    f"Sluice has no {other} resources; ACLs name TOPIC, GROUP or CLUSTER"
                )
            raise AclRequestError(f"an ACL binding needs a specific {what}, not code {code}")
        return name

    return {
        "principal": creation["principal"],
        "host": creation["host"],
        "resource_type": specific(
            "resource_type", RESOURCE_TYPES, creation["resource_type"], "resource type"
        ),
        "resource_name": creation["resource_name"],
        "pattern_type": specific(
            "pattern_type", PATTERN_TYPES, creation["resource_pattern_type"], "pattern type"
        ),
        "operation": specific("operation", OPERATIONS, creation["operation"], "operation"),
        "permission": specific(
            "permission", PERMISSIONS, creation["permission_type"], "permission"
        ),
    }


def filter_of(request: Mapping[str, Any]) -> AclBindingFilter | None:
    """A DescribeAcls request or DeleteAcls filter as Sluice's filter; ``None`` when it
    can match no Sluice binding (a resource type Sluice does not have). Raises
    :class:`AclRequestError` for UNKNOWN (0) codes, which Kafka refuses as invalid."""
    rtype = request["resource_type_filter"]
    ptype = request["pattern_type_filter"]
    op = request["operation"]
    perm = request["permission_type"]
    for code, what in ((rtype, "resource type"), (ptype, "pattern type"), (op, "operation")):
        if code == UNKNOWN:
            raise AclRequestError(f"the filter's {what} is UNKNOWN (0)")
    if perm == UNKNOWN:
        raise AclRequestError("the filter's permission type is UNKNOWN (0)")
    if rtype != ANY and rtype not in RESOURCE_TYPES:
        if rtype in UNSUPPORTED_RESOURCE_TYPES:
            return None
        raise AclRequestError(f"unknown resource type code {rtype}")
    for code, table, what in (
        (ptype, PATTERN_TYPES, "pattern type"),
        (op, OPERATIONS, "operation"),
        (perm, PERMISSIONS, "permission type"),
    ):
        if code != ANY and code not in table:
            raise AclRequestError(f"unknown {what} code {code}")
    return AclBindingFilter(
        principal=request["principal_filter"],
        host=request["host_filter"],
        resource_type=None if rtype == ANY else RESOURCE_TYPES[rtype],  # type: ignore[arg-type]
        resource_name=request["resource_name_filter"],
        pattern_type="ANY" if ptype == ANY else PATTERN_TYPES[ptype],  # type: ignore[arg-type]
        operation=None if op == ANY else OPERATIONS[op],  # type: ignore[arg-type]
        permission=None if perm == ANY else PERMISSIONS[perm],  # type: ignore[arg-type]
    )


def parse_bindings(rows: list[Mapping[str, Any]]) -> list[tuple[str, AclBinding]]:
    """The control plane's ACL list as (id, binding) pairs (rows it cannot parse skipped)."""
    out = []
    for row in rows:
        try:
            out.append((str(row["id"]), AclBinding.from_dict(row)))
        except (KeyError, ValueError):
            continue
    return out


def describe_resources(bindings: list[AclBinding]) -> list[dict]:
    """DescribeAcls' ``resources``: the bindings grouped by resource pattern."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for b in bindings:
        key = (b.resource_type.name, b.resource_name, b.pattern_type.name)
        groups.setdefault(key, []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": code_of("operation", b.operation.name),
                "permission_type": code_of("permission", b.permission.name),
            }
        )
    return [
        {
            "resource_type": code_of("resource_type", rtype),
            "resource_name": name,
            "pattern_type": code_of("pattern_type", ptype),
            "acls": acls,
        }
        for (rtype, name, ptype), acls in groups.items()
    ]


def matching_acl(b: AclBinding, error_code: int = 0, message: str | None = None) -> dict:
    """One DeleteAcls ``matching_acls`` entry."""
    return {
        "error_code": error_code,
        "error_message": message,
        "resource_type": code_of("resource_type", b.resource_type.name),
        "resource_name": b.resource_name,
        "pattern_type": code_of("pattern_type", b.pattern_type.name),
        "principal": b.principal,
        "host": b.host,
        "operation": code_of("operation", b.operation.name),
        "permission_type": code_of("permission", b.permission.name),
    }
