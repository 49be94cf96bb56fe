"""The authorizer: Kafka's ACL model as one pure module (no I/O, no asyncio, no Django).

Brokers call it on every data-plane request and the control plane calls it for the console and
to validate ACLs before it stores them, so both sides decide the same way. The semantics are
Kafka's ``AclAuthorizer`` / ``StandardAuthorizer``:

- an ACL binding is (principal, host, resource type, resource name, pattern type, operation,
  permission); a binding *matches* a request when the resource type is equal, the name matches
  (LITERAL: equal, or the literal wildcard ``*``; PREFIXED: the name starts with the prefix),
  the principal is equal or the wildcard ``User:*``, the host is equal or ``*``, and the
  operation is equal or ``ALL``;
- super users are always allowed; any matching DENY denies; otherwise a matching ALLOW allows,
  where ALLOW on READ, WRITE, DELETE or ALTER also allows DESCRIBE and ALLOW on ALTER_CONFIGS
  also allows DESCRIBE_CONFIGS (implications never flow from DENY, except DENY ALL);
- no matching ALLOW means deny (unless ``allow_everyone_if_no_acl_found`` and the resource has
  no ACL at all, Kafka's ``allow.everyone.if.no.acl.found``).

An :class:`Authorizer` is an immutable snapshot of the bindings, indexed so that a check costs
O(len(name) + matching bindings): literal names in a dict, prefixes in a character trie.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = [
    "AUTHORIZATION_ERROR_CODES",
    "CLUSTER_RESOURCE_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclBinding",
    "AclBindingFilter",
    "Authorizer",
    "Decision",
    "InvalidAclError",
    "Operation",
    "PatternType",
    "PermissionType",
    "ResourceType",
    "implied_allow_operations",
    "validate_binding",
]

WILDCARD_PRINCIPAL = "User:*"
"""Kafka's wildcard principal: an ACL for ``User:*`` applies to every principal of any type."""
WILDCARD_HOST = "*"
WILDCARD_RESOURCE = "*"
"""A LITERAL binding named ``*`` applies to every resource of its type."""
CLUSTER_RESOURCE_NAME = "kafka-cluster"
"""The one CLUSTER resource, named as Kafka names it (``kafka-acls --cluster``)."""

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME = 249


class _Named(enum.Enum):
    """An enum parsed from its name case-insensitively, ignoring ``_`` and ``-``
    (``"describe_configs"``, ``"DescribeConfigs"`` and ``"DESCRIBE-CONFIGS"`` all parse)."""

    @classmethod
    def parse(cls, value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.replace("_", "").replace("-", "").upper()
            for member in cls:
                if member.name.replace("_", "") == key:
                    return member
        names = ", ".join(m.name for m in cls)
        raise ValueError(f"{value!r} is not one of {names}")

    def __str__(self) -> str:
        return self.name


class ResourceType(_Named):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(_Named):
    """How a binding's resource name matches. LITERAL and PREFIXED are the binding types;
    ANY and MATCH exist only in an :class:`AclBindingFilter`, as in Kafka."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"
    ANY = "ANY"
    MATCH = "MATCH"

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class Operation(_Named):
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    ALL = "ALL"


class PermissionType(_Named):
    ALLOW = "ALLOW"
    DENY = "DENY"


_O = Operation
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[Operation]] = {
    # Kafka's AclEntry.supportedOperations, plus ALL which every resource type accepts.
    ResourceType.TOPIC: frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE}
        | {_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}
    ),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.ALL}),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.IDEMPOTENT_WRITE}
        | {_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.WRITE, _O.DESCRIBE, _O.ALL}),
}
"""Which operations mean something on each resource type (WRITE on a GROUP does not)."""

_IMPLIED_BY: Mapping[Operation, frozenset[Operation]] = {
    # Kafka's AclOperation table: which ALLOWed operations also allow the requested one.
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}

AUTHORIZATION_ERROR_CODES: Mapping[ResourceType, str] = {
    ResourceType.TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    ResourceType.GROUP: "GROUP_AUTHORIZATION_FAILED",
    ResourceType.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
    ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
"""Kafka's error code for a denied request on each resource type."""


def implied_allow_operations(operation: Operation) -> frozenset[Operation]:
    """The operations whose ALLOW allows ``operation`` (itself, ALL, and Kafka's implications)."""
    return _IMPLIED_BY.get(operation, frozenset({operation, _O.ALL}))


@lru_cache(maxsize=4096)
def _canonical_host(host: str) -> str:
    """``*`` or the canonical text of an IP address (so ``::1`` equals ``0:0:0:0:0:0:0:1``).

    An IPv4-mapped IPv6 address (``::ffff:127.0.0.1``, what a dual-stack socket reports for
    an IPv4 client) is the IPv4 address it maps: a binding for either form applies to both.
    """
    if host == WILDCARD_HOST:
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.compressed
    return address.compressed


class InvalidAclError(ValueError):
    """A binding that :func:`validate_binding` refuses; ``errors`` maps field -> messages."""

    error_code = "INVALID_REQUEST"

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = dict(errors)
        detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items())
        super().__init__(f"invalid ACL binding: {detail}")


def validate_binding(
    *,
    principal: Any,
    host: Any = WILDCARD_HOST,
    resource_type: Any,
    resource_name: Any,
    pattern_type: Any = PatternType.LITERAL,
    operation: Any,
    permission: Any = PermissionType.ALLOW,
) -> dict[str, list[str]]:
    """Field errors for a would-be binding, ``{}`` when it is valid.

    Takes raw values (enum members or their names, as a JSON body has them) so the control
    plane can answer 400 with field errors; :class:`AclBinding` runs the same checks.
    """
    errors: dict[str, list[str]] = {}

    def err(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    def parse(name: str, enum_cls: type[_Named], value: Any) -> Any:
        try:
            return enum_cls.parse(value)
        except ValueError as exc:
            err(name, str(exc))
            return None

    rtype = parse("resource_type", ResourceType, resource_type)
    ptype = parse("pattern_type", PatternType, pattern_type)
    op = parse("operation", Operation, operation)
    parse("permission", PermissionType, permission)

    if not isinstance(principal, str) or ":" not in principal:
        err("principal", "must be 'Type:name', e.g. 'User:alice' or 'ServiceAccount:sa-1'.")
    else:
        ptype_name, _, pname = principal.partition(":")
        if not ptype_name or not pname:
            err("principal", "must be 'Type:name' with a non-empty type and name.")
        elif "*" in pname and principal != WILDCARD_PRINCIPAL:
            err(
                "principal",
                f"the only wildcard principal is {WILDCARD_PRINCIPAL!r}; a name may not "
                "contain '*' (principals match literally, not as patterns).",
            )

    if not isinstance(host, str) or not host:
        err("host", "must be '*' or an IP address.")
    elif host != WILDCARD_HOST:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            err("host", f"{host!r} is not '*' or an IP address (host names are not matched).")

    if ptype is not None and not ptype.is_specific:
        err("pattern_type", f"a binding's pattern type is LITERAL or PREFIXED, not {ptype.name}.")
    if (
        op is not None
        and op is not Operation.ALL
        and rtype is not None
        and op not in SUPPORTED_OPERATIONS[rtype]
    ):
        allowed = ", ".join(sorted(o.name for o in SUPPORTED_OPERATIONS[rtype]))
        err("operation", f"{op.name} does not apply to {rtype.name}; use one of {allowed}.")

    if not isinstance(resource_name, str) or not resource_name:
        err("resource_name", "must not be empty.")
    elif ptype is PatternType.PREFIXED and resource_name == WILDCARD_RESOURCE:
        err("resource_name", "a PREFIXED '*' is not a wildcard; use LITERAL '*' for all names.")
    elif rtype is ResourceType.CLUSTER:
        if resource_name != CLUSTER_RESOURCE_NAME or ptype is PatternType.PREFIXED:
            err("resource_name", f"the CLUSTER resource is LITERAL {CLUSTER_RESOURCE_NAME!r}.")
    elif rtype is ResourceType.TOPIC and resource_name != WILDCARD_RESOURCE:
        if len(resource_name) > _MAX_TOPIC_NAME:
            err("resource_name", f"a topic name is at most {_MAX_TOPIC_NAME} characters.")
        elif not _TOPIC_NAME.fullmatch(resource_name):
            err("resource_name", "a topic name uses only ASCII letters, digits, '.', '_', '-'.")
    return errors


@dataclass(frozen=True, kw_only=True)
class AclBinding:
    """One ACL: ``principal`` from ``host`` may (ALLOW) or may not (DENY) perform
    ``operation`` on resources of ``resource_type`` whose name matches ``resource_name``
    under ``pattern_type``. Enum fields accept their names; ``host`` is canonicalised.

    Raises :class:`InvalidAclError` when :func:`validate_binding` finds errors, so every
    binding an :class:`Authorizer` holds is well formed.
    """

    principal: str
    host: str = WILDCARD_HOST
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType = PatternType.LITERAL
    operation: Operation
    permission: PermissionType = PermissionType.ALLOW

    def __post_init__(self) -> None:
        errors = validate_binding(**self._fields())
        if errors:
            raise InvalidAclError(errors)
        set_ = object.__setattr__
        set_(self, "resource_type", ResourceType.parse(self.resource_type))
        set_(self, "pattern_type", PatternType.parse(self.pattern_type))
        set_(self, "operation", Operation.parse(self.operation))
        set_(self, "permission", PermissionType.parse(self.permission))
        set_(self, "host", _canonical_host(self.host))

    def _fields(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "host": self.host,
            "resource_type": self.resource_type,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type,
            "operation": self.operation,
            "permission": self.permission,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> AclBinding:
        """A binding from its JSON form (the metadata log, a REST body); unknown keys ignored."""
        keys = ("principal", "host", "resource_type", "resource_name", "pattern_type")
        kwargs = {k: doc[k] for k in (*keys, "operation", "permission") if k in doc}
        required = ("principal", "resource_type", "resource_name", "operation")
        missing = {k: ["is required."] for k in required if k not in kwargs}
        if missing:
            raise InvalidAclError(missing)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in self._fields().items()}

    def __str__(self) -> str:
        return (
            f"{self.permission.name} {self.principal} from {self.host} "
            f"{self.operation.name} on {self.resource_type.name} "
            f"{self.pattern_type.name} {self.resource_name!r}"
        )


@dataclass(frozen=True, kw_only=True)
class AclBindingFilter:
    """A query over bindings, as Kafka's ``AclBindingFilter`` (describe/delete ACLs).

    ``None`` matches anything. Fields compare exactly (``User:*`` finds only wildcard
    bindings), except ``pattern_type``: ANY matches both pattern types by exact name, and
    MATCH finds every binding that would apply to the resource ``resource_name`` (the literal
    name, the literal ``*`` and every prefix of it).
    """

    principal: str | None = None
    host: str | None = None
    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    operation: Operation | None = None
    permission: PermissionType | None = None

    def matches(self, b: AclBinding) -> bool:
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and _canonical_host(self.host) != b.host:
            return False
        if self.operation is not None and Operation.parse(self.operation) is not b.operation:
            return False
        if self.permission is not None and PermissionType.parse(self.permission) is not (
            b.permission
        ):
            return False
        if self.resource_type is not None and (
            ResourceType.parse(self.resource_type) is not b.resource_type
        ):
            return False
        ptype = PatternType.parse(self.pattern_type)
        if ptype.is_specific and ptype is not b.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if ptype is not PatternType.MATCH:
            return self.resource_name == b.resource_name
        if b.pattern_type is PatternType.LITERAL:
            return b.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        return self.resource_name.startswith(b.resource_name)


@dataclass(frozen=True)
class Decision:
    """An authorization answer that explains itself: ``reason`` names the deciding binding
    (``binding``), or says that no ACL allows the request. Truthy when allowed."""

    allowed: bool
    reason: str
    binding: AclBinding | None = None

    def __bool__(self) -> bool:
        return self.allowed


# principal -> bindings for one resource pattern
_ByPrincipal = dict[str, list[AclBinding]]


@dataclass
class _TrieNode:
    children: dict[str, _TrieNode] = field(default_factory=dict)
    acls: _ByPrincipal | None = None


class Authorizer:
    """An immutable snapshot of ACL bindings that answers :meth:`authorize`.

    ``super_users`` (principals such as ``User:admin``) are always allowed. Build a new
    Authorizer when the bindings change; checks never scan every binding.
    """

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        unique = dict.fromkeys(bindings)  # Kafka keeps a set; order kept for stable reasons
        self._bindings: tuple[AclBinding, ...] = tuple(unique)
        self._super_users = frozenset(super_users)
        self._allow_if_none = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], _ByPrincipal] = {}
        self._prefixed: dict[ResourceType, _TrieNode] = {}
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        for b in self._bindings:
            if not isinstance(b, AclBinding):
                raise TypeError(f"expected AclBinding, got {type(b).__name__}")
            if b.pattern_type is PatternType.LITERAL:
                slot = self._literal.setdefault((b.resource_type, b.resource_name), {})
            else:
                node = self._prefixed.setdefault(b.resource_type, _TrieNode())
                for ch in b.resource_name:
                    node = node.children.setdefault(ch, _TrieNode())
                if node.acls is None:
                    node.acls = {}
                slot = node.acls
            slot.setdefault(b.principal, []).append(b)
            self._by_type.setdefault(b.resource_type, []).append(b)

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    @property
    def super_users(self) -> frozenset[str]:
        return self._super_users

    def __len__(self) -> int:
        return len(self._bindings)

    def acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The bindings that ``acl_filter`` matches (all of them without one); a scan."""
        if acl_filter is None:
            return list(self._bindings)
        return [b for b in self._bindings if acl_filter.matches(b)]

    def _resource_slots(self, resource_type: ResourceType, name: str) -> list[_ByPrincipal]:
        """Per-principal binding maps that apply to the resource, most specific first:
        the literal name, the literal wildcard, then prefixes longest first."""
        slots: list[_ByPrincipal] = []
        exact = self._literal.get((resource_type, name))
        if exact:
            slots.append(exact)
        if name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard:
                slots.append(wildcard)
        node = self._prefixed.get(resource_type)
        prefixes: list[_ByPrincipal] = []
        if node is not None:
            for ch in name:
                node = node.children.get(ch)
                if node is None:
                    break
                if node.acls:
                    prefixes.append(node.acls)
        slots.extend(reversed(prefixes))
        return slots

    def authorize(
        self,
        principal: str,
        host: str | None,
        operation: Operation | str,
        resource_type: ResourceType | str,
        resource_name: str,
    ) -> Decision:
        """May ``principal`` connecting from ``host`` perform ``operation`` on the resource?

        Super user -> allow; any matching DENY -> deny; a matching ALLOW (with Kafka's
        implications) -> allow; else deny. ``host=None`` (the address is unknown) fails closed:
        a DENY for any host applies, an ALLOW only when it is for every host (``*``).
        """
        op = Operation.parse(operation)
        rtype = ResourceType.parse(resource_type)
        if op is Operation.ALL:
            raise ValueError("authorize a concrete operation, not ALL")
        if principal in self._super_users:
            return Decision(True, f"{principal} is a super user")
        slots = self._resource_slots(rtype, resource_name)
        if self._allow_if_none and not slots:
            return Decision(
                True,
                f"no ACL on {rtype.name} {resource_name!r} and "
                "allow.everyone.if.no.acl.found is set",
            )
        chost = _canonical_host(host) if host is not None else None
        principals = (
            (principal, WILDCARD_PRINCIPAL) if principal != WILDCARD_PRINCIPAL else (principal,)
        )
        candidates = [
            b
            for slot in slots
            for p in principals
            for b in slot.get(p, ())
            if chost is None or b.host == chost or b.host == WILDCARD_HOST
        ]
        for b in candidates:
            if b.permission is PermissionType.DENY and b.operation in (op, Operation.ALL):
                return Decision(False, f"denied by ACL [{b}]", b)
        allow_ops = implied_allow_operations(op)
        for b in candidates:
            if chost is None and b.host != WILDCARD_HOST:
                continue
            if b.permission is PermissionType.ALLOW and b.operation in allow_ops:
                return Decision(True, f"allowed by ACL [{b}]", b)
        what = f"{principal} from {host} to {op.name} {rtype.name} {resource_name!r}"
        return Decision(False, f"no ACL allows {what}")

    def authorize_by_resource_type(
        self,
        principal: str,
        host: str | None,
        operation: Operation | str,
        resource_type: ResourceType | str,
    ) -> Decision:
        """May ``principal`` perform ``operation`` on *some* resource of ``resource_type``?

        Kafka's ``authorizeByResourceType`` (KIP-679), e.g. an idempotent producer needs
        IDEMPOTENT_WRITE on the cluster or WRITE on any topic. Allowed when an ALLOW (operation
        or ALL; no implications, as in Kafka) on a literal name or prefix is not dominated by a
        DENY: a literal ``*`` DENY dominates everything, a literal DENY its own name, a
        prefixed DENY every name and prefix starting with it. Scans the type's bindings.
        ``host=None`` fails closed as in :meth:`authorize`.
        """
        op = Operation.parse(operation)
        rtype = ResourceType.parse(resource_type)
        if op is Operation.ALL:
            raise ValueError("authorize a concrete operation, not ALL")
        if principal in self._super_users:
            return Decision(True, f"{principal} is a super user")
        chost = _canonical_host(host) if host is not None else None
        what = f"{principal} from {host} to {op.name} any {rtype.name}"
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for b in self._by_type.get(rtype, ()):
            if b.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if b.operation not in (op, Operation.ALL):
                continue
            if chost is not None and b.host not in (chost, WILDCARD_HOST):
                continue
            if b.permission is PermissionType.ALLOW:
                if chost is None and b.host != WILDCARD_HOST:
                    continue
                allows.append(b)
            elif b.pattern_type is PatternType.PREFIXED:
                deny_prefixed.add(b.resource_name)
            elif b.resource_name == WILDCARD_RESOURCE:
                return Decision(False, f"denied by ACL [{b}]", b)
            else:
                deny_literal.add(b.resource_name)
        for b in allows:
            name = b.resource_name
            if b.pattern_type is PatternType.LITERAL and name == WILDCARD_RESOURCE:
                return Decision(True, f"allowed by ACL [{b}]", b)
        for b in allows:
            name = b.resource_name
            if b.pattern_type is PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                continue
            return Decision(True, f"allowed by ACL [{b}]", b)
        return Decision(False, f"no ACL allows {what} that a DENY does not cover")
