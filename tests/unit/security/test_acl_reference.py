"""The indexed authorizer agrees with a naive reference that scans every binding."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    PermissionType,
    ResourceType,
)

PRINCIPALS = ["User:a", "User:b", "ServiceAccount:a", "User:*"]
REQUEST_PRINCIPALS = ["User:a", "User:b", "ServiceAccount:a", "User:c", "User:root"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
REQUEST_HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
NAME = st.text(alphabet="ab.", min_size=1, max_size=4)
RTYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]

# Kafka's implication table, written out independently of the module under test.
IMPLIES = {
    Operation.DESCRIBE: {"READ", "WRITE", "DELETE", "ALTER"},
    Operation.DESCRIBE_CONFIGS: {"ALTER_CONFIGS"},
}


@st.composite
def bindings(draw):
    rtype = draw(st.sampled_from(RTYPES))
    if rtype is ResourceType.CLUSTER:
        name, pattern = "kafka-cluster", PatternType.LITERAL
    else:
        pattern = draw(st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
        name = draw(NAME | st.just("*")) if pattern is PatternType.LITERAL else draw(NAME)
    return AclBinding(
        principal=draw(st.sampled_from(PRINCIPALS)),
        host=draw(st.sampled_from(HOSTS)),
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        operation=draw(st.sampled_from(sorted(SUPPORTED_OPERATIONS[rtype], key=str))),
        permission=draw(st.sampled_from(list(PermissionType))),
    )


@st.composite
def requests(draw):
    rtype = draw(st.sampled_from(RTYPES))
    name = "kafka-cluster" if rtype is ResourceType.CLUSTER else draw(NAME | st.just("*"))
    ops = sorted(SUPPORTED_OPERATIONS[rtype] - {Operation.ALL}, key=str)
    return (
        draw(st.sampled_from(REQUEST_PRINCIPALS)),
        draw(st.sampled_from(REQUEST_HOSTS)),
        draw(st.sampled_from(ops)),
        rtype,
        name,
    )


def applies(b: AclBinding, principal, host, rtype, name) -> bool:
    if b.resource_type is not rtype:
        return False
    if b.pattern_type is PatternType.LITERAL:
        if b.resource_name not in (name, "*"):
            return False
    elif not name.startswith(b.resource_name):
        return False
    return b.principal in (principal, "User:*") and b.host in (host, "*")


def reference(all_bindings, super_users, principal, host, op, rtype, name) -> bool:
    if principal in super_users:
        return True
    matching = [b for b in all_bindings if applies(b, principal, host, rtype, name)]
    if any(
        b.permission is PermissionType.DENY and b.operation in (op, Operation.ALL) for b in matching
    ):
        return False
    allowing = {op.name, "ALL"} | IMPLIES.get(op, set())
    return any(
        b.permission is PermissionType.ALLOW and b.operation.name in allowing for b in matching
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings(), max_size=30), st.lists(requests(), min_size=1, max_size=20))
def test_authorizer_agrees_with_a_scan(all_bindings, reqs):
    auth = Authorizer(all_bindings, super_users={"User:root"})
    for principal, host, op, rtype, name in reqs:
        decision = auth.authorize(principal, host, op, rtype, name)
        expected = reference(all_bindings, {"User:root"}, principal, host, op, rtype, name)
        assert decision.allowed is expected, (decision, principal, host, op, rtype, name)
        if decision.binding is not None:
            # the reported binding really applies and has the deciding permission
            assert applies(decision.binding, principal, host, rtype, name)
            assert decision.binding.permission is (
                PermissionType.ALLOW if expected else PermissionType.DENY
            )
        elif principal != "User:root":
            assert not expected and decision.reason.startswith("no ACL allows")


@settings(max_examples=100, deadline=None)
@given(st.lists(bindings(), max_size=30), requests())
def test_adding_an_allow_never_removes_access_and_a_deny_never_grants_it(all_bindings, req):
    principal, host, op, rtype, name = req
    before = Authorizer(all_bindings).authorize(principal, host, op, rtype, name).allowed
    extra_allow = AclBinding(
        principal=principal, host=host, resource_type=rtype, resource_name=name,
        operation=op, permission=PermissionType.ALLOW,
    )  # fmt: skip
    extra_deny = AclBinding(**{**extra_allow.to_dict(), "permission": "DENY"})
    with_allow = Authorizer([*all_bindings, extra_allow]).authorize(
        principal, host, op, rtype, name
    )
    with_deny = Authorizer([*all_bindings, extra_deny]).authorize(principal, host, op, rtype, name)
    assert with_allow.allowed or not before
    assert not with_deny.allowed


def exact_reference(all_bindings, principal, host, op, rtype, name) -> bool:
    """authorize() without implications, as Kafka's authorizeByResourceType counts ALLOWs."""
    matching = [b for b in all_bindings if applies(b, principal, host, rtype, name)]
    ops = (op, Operation.ALL)
    if any(b.permission is PermissionType.DENY and b.operation in ops for b in matching):
        return False
    return any(b.permission is PermissionType.ALLOW and b.operation in ops for b in matching)


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings(), max_size=30), requests())
def test_authorize_by_resource_type_means_some_resource_is_allowed(all_bindings, req):
    principal, host, op, rtype, _ = req
    decision = Authorizer(all_bindings).authorize_by_resource_type(principal, host, op, rtype)
    # Names are drawn from "ab."; a "z" suffix steps past every longer prefixed DENY, and "zz"
    # stands for any name no binding mentions.
    candidates = {"zz"} | {
        name
        for b in all_bindings
        if b.resource_type is rtype
        for name in (b.resource_name, b.resource_name + "z")
        if name not in ("*", "*z")
    }
    if rtype is ResourceType.CLUSTER:
        candidates = {"kafka-cluster"}
    expected = any(
        exact_reference(all_bindings, principal, host, op, rtype, name) for name in candidates
    )
    assert decision.allowed is expected, (decision, req)
