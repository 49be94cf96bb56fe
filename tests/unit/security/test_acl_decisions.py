"""The authorizer's decision table: Kafka's matching rules, DENY precedence and implications."""

from __future__ import annotations

import pytest

from brokernodes.security.acl import (
    AUTHORIZATION_ERROR_CODES,
    AclBinding,
    AclBindingFilter,
    Authorizer,
    Operation,
    PatternType,
    PermissionType,
    ResourceType,
    implied_allow_operations,
)

ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(perm, principal, op, rtype, name, pattern=LIT, host="*"):
    return AclBinding(
        principal=principal,
        host=host,
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        operation=op,
        permission=perm,
    )


BINDINGS = [
    # alice: a literal topic, a prefixed family, denied from one host
    acl(ALLOW, "User:alice", "READ", "TOPIC", "orders"),
    acl(ALLOW, "User:alice", "WRITE", "TOPIC", "logs-", PRE),
    acl(DENY, "User:alice", "ALL", "TOPIC", "logs-", PRE, host="10.0.0.66"),
    acl(ALLOW, "User:alice", "READ", "GROUP", "app-", PRE),
    # bob: DENY on prefix foo beats ALLOW on literal foobar
    acl(DENY, "User:bob", "READ", "TOPIC", "foo", PRE),
    acl(ALLOW, "User:bob", "READ", "TOPIC", "foobar"),
    acl(ALLOW, "User:bob", "WRITE", "TOPIC", "foobar"),
    # everyone may read "public"; nobody may do anything from 10.9.9.9
    acl(ALLOW, "User:*", "READ", "TOPIC", "public"),
    acl(DENY, "User:*", "ALL", "TOPIC", "*", host="10.9.9.9"),
    # carol may describe every topic
    acl(ALLOW, "User:carol", "DESCRIBE", "TOPIC", "*"),
    # dave owns dave.* except deleting dave.keep
    acl(ALLOW, "User:dave", "ALL", "TOPIC", "dave.", PRE),
    acl(DENY, "User:dave", "DELETE", "TOPIC", "dave.keep"),
    # erin: implications
    acl(ALLOW, "User:erin", "ALTER_CONFIGS", "TOPIC", "cfg"),
    acl(ALLOW, "User:erin", "DELETE", "TOPIC", "del"),
    acl(ALLOW, "User:erin", "ALTER", "TOPIC", "alt"),
    acl(ALLOW, "User:erin", "DESCRIBE", "TOPIC", "desc"),
    # frank: DENY READ does not deny DESCRIBE; DENY DESCRIBE does not deny READ
    acl(DENY, "User:frank", "READ", "TOPIC", "cfg"),
    acl(ALLOW, "User:frank", "DESCRIBE", "TOPIC", "cfg"),
    acl(DENY, "User:frank", "DESCRIBE", "TOPIC", "r"),
    acl(ALLOW, "User:frank", "READ", "TOPIC", "r"),
    # gina: DENY ALL beats every ALLOW
    acl(ALLOW, "User:gina", "READ", "TOPIC", "g"),
    acl(ALLOW, "User:gina", "ALL", "TOPIC", "g"),
    acl(DENY, "User:gina", "ALL", "TOPIC", "g"),
    # hank: host-specific allow, IPv6 written long-hand
    acl(ALLOW, "User:hank", "READ", "TOPIC", "h", host="192.168.1.10"),
    acl(ALLOW, "User:hank", "WRITE", "TOPIC", "h", host="0:0:0:0:0:0:0:1"),
    # a service account: cluster operations and every topic
    acl(ALLOW, "ServiceAccount:sa-1", "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster"),
    acl(ALLOW, "ServiceAccount:sa-1", "CREATE", "CLUSTER", "kafka-cluster"),
    acl(ALLOW, "ServiceAccount:sa-1", "WRITE", "TOPIC", "*"),
    # ivan: a GROUP named like a topic grants nothing on the topic
    acl(ALLOW, "User:ivan", "READ", "GROUP", "orders"),
    # a literal ACL on a name that looks like a prefix is not a prefix
    acl(ALLOW, "User:judy", "READ", "TOPIC", "ab"),
]

AUTH = Authorizer(BINDINGS, super_users={"User:admin"})

H = "10.1.2.3"

# principal, host, operation, resource type, name, allowed, words the reason contains
TABLE = [
    # literal and prefixed matches
    ("User:alice", H, "READ", "TOPIC", "orders", True, "LITERAL 'orders'"),
    ("User:alice", H, "READ", "TOPIC", "orders2", False, "no ACL allows"),
    ("User:alice", H, "WRITE", "TOPIC", "orders", False, "no ACL allows"),
    ("User:alice", H, "WRITE", "TOPIC", "logs-app", True, "PREFIXED 'logs-'"),
    ("User:alice", H, "WRITE", "TOPIC", "logs-", True, "PREFIXED 'logs-'"),
    ("User:alice", H, "WRITE", "TOPIC", "logs", False, "no ACL allows"),
    ("User:alice", "10.0.0.66", "WRITE", "TOPIC", "logs-app", False, "DENY User:alice from 10.0"),
    ("User:alice", "10.0.0.66", "READ", "TOPIC", "orders", True, "LITERAL 'orders'"),
    ("User:alice", H, "READ", "GROUP", "app-1", True, "GROUP PREFIXED 'app-'"),
    ("User:alice", H, "READ", "TOPIC", "app-1", False, "no ACL allows"),
    # DENY on prefix foo beats ALLOW on literal foobar
    ("User:bob", H, "READ", "TOPIC", "foobar", False, "DENY User:bob from * READ on TOPIC PREFIX"),
    ("User:bob", H, "READ", "TOPIC", "foo", False, "PREFIXED 'foo'"),
    ("User:bob", H, "WRITE", "TOPIC", "foobar", True, "ALLOW User:bob from * WRITE"),
    ("User:bob", H, "DESCRIBE", "TOPIC", "foobar", True, "ALLOW User:bob"),
    ("User:bob", H, "READ", "TOPIC", "fo", False, "no ACL allows"),
    # wildcard principal and host
    ("User:zed", H, "READ", "TOPIC", "public", True, "User:*"),
    ("ServiceAccount:sa-9", H, "READ", "TOPIC", "public", True, "User:*"),
    ("User:zed", H, "WRITE", "TOPIC", "public", False, "no ACL allows"),
    ("User:zed", "10.9.9.9", "READ", "TOPIC", "public", False, "DENY User:* from 10.9.9.9 ALL"),
    ("User:alice", "10.9.9.9", "READ", "TOPIC", "orders", False, "DENY User:* from 10.9.9.9"),
    ("User:alice", "10.9.9.9", "READ", "GROUP", "app-1", True, "GROUP"),
    # wildcard resource
    ("User:carol", H, "DESCRIBE", "TOPIC", "anything", True, "LITERAL '*'"),
    ("User:carol", H, "READ", "TOPIC", "anything", False, "no ACL allows"),
    ("User:carol", H, "DESCRIBE", "GROUP", "anything", False, "no ACL allows"),
    # ALL
    ("User:dave", H, "WRITE", "TOPIC", "dave.x", True, "ALL on TOPIC PREFIXED 'dave.'"),
    ("User:dave", H, "ALTER_CONFIGS", "TOPIC", "dave.x", True, "ALL"),
    ("User:dave", H, "DELETE", "TOPIC", "dave.x", True, "ALL"),
    ("User:dave", H, "DELETE", "TOPIC", "dave.keep", False, "DENY User:dave from * DELETE"),
    ("User:dave", H, "READ", "TOPIC", "dave.keep", True, "ALL"),
    ("User:dave", H, "READ", "TOPIC", "davex", False, "no ACL allows"),
    # implications
    ("User:erin", H, "DESCRIBE_CONFIGS", "TOPIC", "cfg", True, "ALTER_CONFIGS"),
    ("User:erin", H, "DESCRIBE", "TOPIC", "cfg", False, "no ACL allows"),
    ("User:erin", H, "DESCRIBE", "TOPIC", "del", True, "DELETE"),
    ("User:erin", H, "DESCRIBE", "TOPIC", "alt", True, "ALTER"),
    ("User:erin", H, "DESCRIBE_CONFIGS", "TOPIC", "alt", False, "no ACL allows"),
    ("User:erin", H, "ALTER_CONFIGS", "TOPIC", "cfg", True, "ALTER_CONFIGS"),
    ("User:erin", H, "READ", "TOPIC", "desc", False, "no ACL allows"),
    ("User:alice", H, "DESCRIBE", "TOPIC", "orders", True, "READ"),
    ("User:alice", H, "DESCRIBE", "TOPIC", "logs-x", True, "WRITE"),
    ("User:alice", H, "DESCRIBE", "GROUP", "app-x", True, "READ"),
    # deny implications do not flow
    ("User:frank", H, "DESCRIBE", "TOPIC", "cfg", True, "ALLOW User:frank from * DESCRIBE"),
    ("User:frank", H, "READ", "TOPIC", "cfg", False, "DENY User:frank from * READ"),
    ("User:frank", H, "READ", "TOPIC", "r", True, "ALLOW User:frank from * READ"),
    ("User:frank", H, "DESCRIBE", "TOPIC", "r", False, "DENY User:frank from * DESCRIBE"),
    # DENY ALL beats any ALLOW
    ("User:gina", H, "READ", "TOPIC", "g", False, "DENY User:gina from * ALL"),
    ("User:gina", H, "DESCRIBE", "TOPIC", "g", False, "DENY"),
    ("User:gina", H, "WRITE", "TOPIC", "g", False, "DENY"),
    # hosts, including IPv6 canonical forms
    ("User:hank", "192.168.1.10", "READ", "TOPIC", "h", True, "from 192.168.1.10"),
    ("User:hank", "192.168.1.11", "READ", "TOPIC", "h", False, "no ACL allows"),
    ("User:hank", "::1", "WRITE", "TOPIC", "h", True, "from ::1"),
    ("User:hank", "0::0:1", "WRITE", "TOPIC", "h", True, "from ::1"),
    ("User:hank", "unknown", "WRITE", "TOPIC", "h", False, "no ACL allows"),
    # cluster operations and a service account on every topic
    ("ServiceAccount:sa-1", H, "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster", True, "CLUSTER"),
    ("ServiceAccount:sa-1", H, "CREATE", "CLUSTER", "kafka-cluster", True, "CREATE"),
    ("ServiceAccount:sa-1", H, "ALTER", "CLUSTER", "kafka-cluster", False, "no ACL allows"),
    ("ServiceAccount:sa-1", H, "WRITE", "TOPIC", "any.topic", True, "LITERAL '*'"),
    ("ServiceAccount:sa-1", H, "READ", "TOPIC", "any.topic", False, "no ACL allows"),
    ("User:sa-1", H, "WRITE", "TOPIC", "any.topic", False, "no ACL allows"),
    # resource type must match
    ("User:ivan", H, "READ", "TOPIC", "orders", False, "no ACL allows"),
    ("User:ivan", H, "READ", "GROUP", "orders", True, "GROUP LITERAL 'orders'"),
    # literal is not a prefix; a request for '*' only matches the literal '*'
    ("User:judy", H, "READ", "TOPIC", "abc", False, "no ACL allows"),
    ("User:judy", H, "READ", "TOPIC", "ab", True, "LITERAL 'ab'"),
    # super users and strangers
    ("User:admin", "10.9.9.9", "DELETE", "TOPIC", "gina", True, "super user"),
    ("User:admin", H, "ALTER", "CLUSTER", "kafka-cluster", True, "super user"),
    ("User:nobody", H, "READ", "TOPIC", "orders", False, "no ACL allows User:nobody"),
    ("User:*", H, "READ", "TOPIC", "public", True, "User:*"),
]


@pytest.mark.parametrize(
    ("principal", "host", "op", "rtype", "name", "allowed", "reason"),
    TABLE,
    ids=[f"{r[0]}-{r[1]}-{r[2]}-{r[3]}-{r[4]}" for r in TABLE],
)
def test_decision_table(principal, host, op, rtype, name, allowed, reason):
    decision = AUTH.authorize(principal, host, op, rtype, name)
    assert decision.allowed is allowed, decision.reason
    assert bool(decision) is allowed
    assert reason in decision.reason
    if decision.binding is not None:
        assert str(decision.binding) in decision.reason
        assert decision.binding.permission is (ALLOW if allowed else DENY)


def test_deny_on_prefix_foo_beats_allow_on_literal_foobar():
    auth = Authorizer(
        [
            acl(ALLOW, "User:bob", "READ", "TOPIC", "foobar"),
            acl(DENY, "User:bob", "READ", "TOPIC", "foo", PRE),
        ]
    )
    decision = auth.authorize("User:bob", "1.2.3.4", Operation.READ, ResourceType.TOPIC, "foobar")
    assert not decision.allowed
    assert decision.binding == acl(DENY, "User:bob", "READ", "TOPIC", "foo", PRE)
    assert decision.reason == "denied by ACL [DENY User:bob from * READ on TOPIC PREFIXED 'foo']"


def test_no_bindings_denies_everything_but_super_users():
    auth = Authorizer([], super_users=["User:root"])
    assert not auth.authorize("User:a", "1.1.1.1", "READ", "TOPIC", "t")
    assert auth.authorize("User:root", "1.1.1.1", "READ", "TOPIC", "t")
    assert auth.authorize("User:a", "1.1.1.1", "READ", "TOPIC", "t").reason == (
        "no ACL allows User:a from 1.1.1.1 to READ TOPIC 't'"
    )


def test_allow_everyone_if_no_acl_found_only_for_resources_without_acls():
    auth = Authorizer(
        [acl(ALLOW, "User:a", "READ", "TOPIC", "guarded")], allow_everyone_if_no_acl_found=True
    )
    open_ = auth.authorize("User:b", "1.1.1.1", "WRITE", "TOPIC", "open")
    assert open_.allowed and "allow.everyone.if.no.acl.found" in open_.reason
    assert not auth.authorize("User:b", "1.1.1.1", "READ", "TOPIC", "guarded")


def test_authorizing_all_is_refused():
    with pytest.raises(ValueError, match="not ALL"):
        AUTH.authorize("User:alice", H, "ALL", "TOPIC", "orders")


def test_most_specific_binding_is_reported():
    auth = Authorizer(
        [
            acl(ALLOW, "User:*", "READ", "TOPIC", "t", PRE),
            acl(ALLOW, "User:a", "READ", "TOPIC", "to", PRE),
            acl(ALLOW, "User:a", "READ", "TOPIC", "*"),
            acl(ALLOW, "User:a", "READ", "TOPIC", "top"),
        ]
    )
    assert auth.authorize("User:a", H, "READ", "TOPIC", "top").binding.resource_name == "top"
    assert auth.authorize("User:a", H, "READ", "TOPIC", "topx").binding.resource_name == "*"
    assert auth.authorize("User:b", H, "READ", "TOPIC", "topx").binding.resource_name == "t"


def test_duplicate_bindings_are_kept_once():
    b = acl(ALLOW, "User:a", "READ", "TOPIC", "t")
    auth = Authorizer([b, b, acl(ALLOW, "User:a", "READ", "TOPIC", "t")])
    assert len(auth) == 1 and auth.bindings == (b,)


def test_only_bindings_accepted():
    with pytest.raises(TypeError):
        Authorizer([{"principal": "User:a"}])  # type: ignore[list-item]


def test_implication_table_is_kafkas():
    op = Operation
    describe = {op.DESCRIBE, op.READ, op.WRITE, op.DELETE, op.ALTER, op.ALL}
    assert implied_allow_operations(op.DESCRIBE) == describe
    assert implied_allow_operations(op.DESCRIBE_CONFIGS) == {
        op.DESCRIBE_CONFIGS,
        op.ALTER_CONFIGS,
        op.ALL,
    }
    assert implied_allow_operations(op.IDEMPOTENT_WRITE) == {op.IDEMPOTENT_WRITE, op.ALL}
    assert implied_allow_operations(op.READ) == {op.READ, op.ALL}


def test_error_codes_per_resource_type():
    assert AUTHORIZATION_ERROR_CODES[ResourceType.TOPIC] == "TOPIC_AUTHORIZATION_FAILED"
    assert AUTHORIZATION_ERROR_CODES[ResourceType.GROUP] == "GROUP_AUTHORIZATION_FAILED"
    assert AUTHORIZATION_ERROR_CODES[ResourceType.CLUSTER] == "CLUSTER_AUTHORIZATION_FAILED"


# -- filters (describe / delete ACLs) -----------------------------------------------------------


def names(bindings):
    return sorted((b.pattern_type.name, b.resource_name) for b in bindings)


def test_filter_match_finds_every_binding_that_applies_to_a_name():
    found = AUTH.acls(
        AclBindingFilter(
            resource_type=ResourceType.TOPIC, resource_name="foobar", pattern_type=PatternType.MATCH
        )
    )
    assert names(found) == [
        ("LITERAL", "*"),
        ("LITERAL", "*"),
        ("LITERAL", "*"),
        ("LITERAL", "foobar"),
        ("LITERAL", "foobar"),
        ("PREFIXED", "foo"),
    ]


def test_filter_any_and_specific_pattern_types_compare_names_exactly():
    any_foo = AUTH.acls(AclBindingFilter(resource_name="foo"))
    assert names(any_foo) == [("PREFIXED", "foo")]
    assert AUTH.acls(AclBindingFilter(resource_name="foo", pattern_type=PatternType.LITERAL)) == []
    orders = AUTH.acls(AclBindingFilter(resource_name="orders"))
    assert {b.resource_type for b in orders} == {ResourceType.TOPIC, ResourceType.GROUP}


def test_filter_on_entry_fields():
    wildcard = AUTH.acls(AclBindingFilter(principal="User:*"))
    assert len(wildcard) == 2
    denies = AUTH.acls(AclBindingFilter(principal="User:gina", permission=PermissionType.DENY))
    assert [b.operation for b in denies] == [Operation.ALL]
    assert len(AUTH.acls(AclBindingFilter(host="::1"))) == 1
    assert len(AUTH.acls(AclBindingFilter(operation=Operation.IDEMPOTENT_WRITE))) == 1
    assert len(AUTH.acls()) == len(BINDINGS)


# -- authorize_by_resource_type (KIP-679) ---------------------------------------------------------


def by_type(bindings, op="WRITE", rtype="TOPIC", principal="User:p", host=H, **kwargs):
    auth = Authorizer(bindings, **kwargs)
    return auth.authorize_by_resource_type(principal, host, op, rtype)


@pytest.mark.parametrize(
    ("bindings", "allowed", "reason"),
    [
        ([], False, "no ACL allows User:p from 10.1.2.3 to WRITE any TOPIC"),
        ([acl(ALLOW, "User:p", "WRITE", "TOPIC", "x", PRE)], True, "PREFIXED 'x'"),
        ([acl(ALLOW, "User:*", "ALL", "TOPIC", "t")], True, "ALL"),
        ([acl(ALLOW, "User:p", "READ", "TOPIC", "t")], False, "no ACL allows"),
        (
            [acl(ALLOW, "User:p", "WRITE", "TOPIC", "t", host="1.1.1.1")],
            False,
            "no ACL allows",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "t"),
                acl(DENY, "User:p", "WRITE", "TOPIC", "*"),
            ],
            False,
            "denied by ACL [DENY",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "*"),
                acl(DENY, "User:p", "WRITE", "TOPIC", "t"),
            ],
            True,
            "LITERAL '*'",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "xy", PRE),
                acl(DENY, "User:p", "ALL", "TOPIC", "x", PRE),
            ],
            False,
            "DENY does not cover",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "x", PRE),
                acl(DENY, "User:p", "WRITE", "TOPIC", "xy", PRE),
            ],
            True,
            "PREFIXED 'x'",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "ab"),
                acl(DENY, "User:p", "WRITE", "TOPIC", "ab"),
            ],
            False,
            "no ACL allows",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "ab", PRE),
                acl(DENY, "User:p", "WRITE", "TOPIC", "ab"),
            ],
            True,
            "PREFIXED 'ab'",
        ),
        (
            [
                acl(ALLOW, "User:p", "WRITE", "TOPIC", "ab"),
                acl(DENY, "User:q", "WRITE", "TOPIC", "*"),
            ],
            True,
            "LITERAL 'ab'",
        ),
    ],
)
def test_authorize_by_resource_type(bindings, allowed, reason):
    decision = by_type(bindings)
    assert decision.allowed is allowed
    assert reason in decision.reason


def test_idempotent_producer_check_as_kip_679():
    # InitProducerId: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
    auth = Authorizer([acl(ALLOW, "User:p", "WRITE", "TOPIC", "events.", PRE)])
    idem = auth.authorize("User:p", H, "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster")
    any_topic = auth.authorize_by_resource_type("User:p", H, "WRITE", "TOPIC")
    assert not idem and any_topic


def test_authorize_by_resource_type_super_user_and_no_implications():
    assert by_type([], principal="User:root", super_users={"User:root"}).allowed
    assert not by_type([acl(ALLOW, "User:p", "READ", "TOPIC", "t")], op="DESCRIBE")
    with pytest.raises(ValueError, match="not ALL"):
        by_type([], op="ALL")


def test_unknown_host_fails_closed():
    """``host=None``: a host-specific DENY applies, a host-specific ALLOW does not."""
    az = Authorizer(
        [
            acl(ALLOW, "User:carol", "READ", "TOPIC", "t", host="10.0.0.1"),
            acl(ALLOW, "User:carol", "WRITE", "TOPIC", "t"),
            acl(DENY, "User:carol", "WRITE", "TOPIC", "t", host="10.0.0.9"),
        ]
    )
    assert az.authorize("User:carol", "10.0.0.1", "READ", "TOPIC", "t")
    assert not az.authorize("User:carol", None, "READ", "TOPIC", "t")
    assert az.authorize("User:carol", "10.0.0.2", "WRITE", "TOPIC", "t")
    assert not az.authorize("User:carol", None, "WRITE", "TOPIC", "t")
    assert not az.authorize_by_resource_type("User:carol", None, "READ", "TOPIC")
    assert az.authorize_by_resource_type("User:carol", "10.0.0.1", "READ", "TOPIC")
    assert not az.authorize_by_resource_type("User:carol", "10.0.0.9", "WRITE", "TOPIC")
