"""Every route, walked from the URL configuration: authentication, tenant isolation, roles.

``ROUTES`` must name every route and every method its view answers; a new route or method
fails ``test_every_route_and_method_is_in_the_table`` until it is added here with its rules,
so no route can skip the checks below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from backend.audit.models import AuditEvent
from backend.keys.models import ApiKey
from backend.tenancy import roles
from backend.topics.models import Topic

from .conftest import World, key_client, session_client

PUBLIC = "public"  # no authentication: health, schema, sign-in helpers
USER = "user"  # a signed-in person, across their organisations (not tenant-scoped)
TENANT = "tenant"  # tenant-scoped; readers read, members write
ADMIN = "admin"  # tenant-scoped admin routes
PLATFORM = "platform"  # platform staff only, cross-tenant by design
BROKER = "broker"  # /internal/v1/: brokers only, by the shared cluster secret (test_cluster.py)


def _epoch(broker_id: int) -> int:
    """The broker's current epoch (-1 before it registers)."""
    from backend.cluster.models import Broker

    b = Broker.objects.filter(broker_id=broker_id).first()
    return b.epoch if b is not None else -1


@dataclass(frozen=True)
class Route:
    kind: str
    methods: tuple[str, ...]
    # URL that names tenant B's object (detail routes), or the collection URL
    url: Callable[[World], str] = lambda w: ""
    # request body per method, built from the world (B's objects where relevant)
    body: Callable[[World, str], Any] = lambda w, m: {}
    # Methods where A naming B's object must get 404 (True: all). Others must not leak B.
    detail: bool | tuple[str, ...] = False
    # Only methods whose role rule differs from the kind's default
    write_role: str | None = None


def _u(route_name: str, /, **kwargs: Any) -> Callable[[World], str]:
    def build(w: World) -> str:
        return reverse(route_name, kwargs={k: v(w) for k, v in kwargs.items()})

    return build


# Confluent REST Proxy v3 and v2 metadata (backend/restproxy; tests/integration/control_plane/
# test_rest_proxy_*.py). Their views need a registered broker to place partitions on
# (``_v3``), as replicas and brokers are addressed by broker id.
def _with_broker() -> None:
    from backend.cluster import services
    from backend.cluster.models import Broker

    if not Broker.objects.filter(broker_id=7).exists():
        services.broker_register(broker_id=7, url="http://127.0.0.1:9099")


def _v3(route_name: str, /, query: str = "", **kwargs: Any) -> Callable[[World], str]:
    def build(w: World) -> str:
        _with_broker()
        args = {"cluster_id": settings.SLUICE_CLUSTER_ID, **{k: v(w) for k, v in kwargs.items()}}
        return reverse(route_name, kwargs=args) + query

    return build


def _b_topic(w: World) -> str:
    return w.b.topic.name


V3_ROUTES: dict[str, Route] = {
    "v3-clusters": Route(TENANT, ("GET",), _u("v3-clusters")),
    "v3-cluster": Route(TENANT, ("GET",), _v3("v3-cluster")),
    "v3-brokers": Route(TENANT, ("GET",), _v3("v3-brokers")),
    "v3-broker": Route(TENANT, ("GET",), _v3("v3-broker", broker_id=lambda w: 7)),
    "v3-topics": Route(
        TENANT,
        ("GET", "POST"),
        _v3("v3-topics"),
        body=lambda w, m: {"topic_name": "fresh-topic", "partitions_count": 1},
    ),
    "v3-topic": Route(TENANT, ("GET", "DELETE"), _v3("v3-topic", topic_name=_b_topic), detail=True),
    "v3-topic-configs": Route(
        TENANT, ("GET",), _v3("v3-topic-configs", topic_name=_b_topic), detail=True
    ),
    "v3-topic-configs-alter": Route(
        TENANT,
        ("POST",),
        _v3("v3-topic-configs-alter", topic_name=_b_topic),
        body=lambda w, m: {"data": [{"name": "retention.ms", "value": "1"}]},
        detail=True,
    ),
    "v3-topic-config": Route(
        TENANT,
        ("GET", "PUT", "DELETE"),
        _v3("v3-topic-config", topic_name=_b_topic, name=lambda w: "retention.ms"),
        body=lambda w, m: {"value": "1"},
        detail=True,
    ),
    "v3-partitions": Route(
        TENANT, ("GET",), _v3("v3-partitions", topic_name=_b_topic), detail=True
    ),
    "v3-partition": Route(
        TENANT,
        ("GET",),
        _v3("v3-partition", topic_name=_b_topic, partition_id=lambda w: 0),
        detail=True,
    ),
    "v3-replicas": Route(
        TENANT,
        ("GET",),
        _v3("v3-replicas", topic_name=_b_topic, partition_id=lambda w: 0),
        detail=True,
    ),
    "v3-replica": Route(
        TENANT,
        ("GET",),
        _v3("v3-replica", topic_name=_b_topic, partition_id=lambda w: 0, broker_id=lambda w: 7),
        detail=True,
    ),
    "v3-acls": Route(
        ADMIN,
        ("GET", "POST", "DELETE"),
        _v3("v3-acls", query="?resource_type=ANY"),
        body=lambda w, m: {
            "principal": "User:x",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "READ",
        },
    ),
    # consumer groups live on the brokers (BROKER_BACKED: 503 here)
    "v3-groups": Route(TENANT, ("GET",), _v3("v3-groups")),
    **{
        name: Route(TENANT, ("GET",), _v3(name, group_id=lambda w: "b-group", **extra))
        for name, extra in (
            ("v3-group", {}),
            ("v3-consumers", {}),
            ("v3-consumer", {"consumer_id": lambda w: "m1"}),
            ("v3-consumer-assignments", {"consumer_id": lambda w: "m1"}),
            ("v3-lags", {}),
            ("v3-lag", {"topic_name": _b_topic, "partition_id": lambda w: 0}),
            ("v3-lag-summary", {}),
        )
    },
}
V2_ROUTES: dict[str, Route] = {
    "v2-topics": Route(TENANT, ("GET",), _u("v2-topics")),
    "v2-topic": Route(TENANT, ("GET",), _u("v2-topic", topic_name=_b_topic), detail=True),
    "v2-partitions": Route(TENANT, ("GET",), _u("v2-partitions", topic_name=_b_topic), detail=True),
    "v2-partition": Route(
        TENANT,
        ("GET",),
        _u("v2-partition", topic_name=_b_topic, partition_id=lambda w: 0),
        detail=True,
    ),
    "v2-brokers": Route(TENANT, ("GET",), _u("v2-brokers")),
}


ROUTES: dict[str, Route] = {
    "healthz": Route(PUBLIC, ("GET",)),
    "readyz": Route(PUBLIC, ("GET",)),
    "schema": Route(PUBLIC, ("GET",)),
    "docs": Route(PUBLIC, ("GET",)),
    "auth-csrf": Route(PUBLIC, ("GET",)),
    "auth-login": Route(PUBLIC, ("POST",)),
    "auth-logout": Route(USER, ("POST",), _u("auth-logout")),
    "auth-me": Route(TENANT, ("GET",), _u("auth-me")),
    "auth-organisation": Route(
        USER,
        ("POST",),
        _u("auth-organisation"),
        body=lambda w, m: {"organisation": w.b.org.slug},
        detail=True,
    ),
    "organisations": Route(
        USER,
        ("GET", "POST"),
        _u("organisations"),
        body=lambda w, m: {"slug": "charlie", "name": "C"},
    ),
    "organisation": Route(
        TENANT,
        ("GET", "PATCH"),
        _u("organisation"),
        body=lambda w, m: {"name": "renamed"},
        write_role=roles.ADMIN,
    ),
    "members": Route(
        ADMIN,
        ("GET", "POST"),
        _u("members"),
        body=lambda w, m: {"username": "platform-staff", "role": "member"},
    ),
    "member-detail": Route(
        ADMIN,
        ("GET", "PATCH", "DELETE"),
        _u("member-detail", membership_id=lambda w: w.b.memberships[roles.MEMBER].id),
        body=lambda w, m: {"role": "admin"},
        detail=True,
    ),
    "invitations": Route(ADMIN, ("GET",), _u("invitations")),
    "invitation-detail": Route(
        ADMIN,
        ("GET", "DELETE"),
        _u("invitation-detail", invitation_id=lambda w: w.b.invitation.id),
        detail=True,
    ),
    "auth-invitations": Route(USER, ("GET",), _u("auth-invitations")),
    # B's invitation is addressed to someone else: 404 for A's people
    "auth-invitation-accept": Route(
        USER,
        ("POST",),
        _u("auth-invitation-accept", invitation_id=lambda w: w.b.invitation.id),
        detail=True,
    ),
    "auth-invitation-decline": Route(
        USER,
        ("POST",),
        _u("auth-invitation-decline", invitation_id=lambda w: w.b.invitation.id),
        detail=True,
    ),
    "service-accounts": Route(
        ADMIN, ("GET", "POST"), _u("service-accounts"), body=lambda w, m: {"name": "new-sa"}
    ),
    "service-account-detail": Route(
        ADMIN,
        ("GET", "PATCH", "DELETE"),
        _u("service-account-detail", service_account_id=lambda w: w.b.accounts[roles.MEMBER].id),
        body=lambda w, m: {"description": "pwned"},
        detail=True,
    ),
    "api-keys": Route(
        ADMIN,
        ("GET", "POST"),
        _u("api-keys"),
        # creating a key for B's service account must be 404
        body=lambda w, m: {"service_account_id": str(w.b.accounts[roles.MEMBER].id)},
        detail=("POST",),
    ),
    "api-key-detail": Route(
        ADMIN,
        ("GET", "DELETE"),
        _u("api-key-detail", key_id=lambda w: w.b.keys[roles.MEMBER].api_key.key_id),
        detail=True,
    ),
    "topics": Route(
        TENANT,
        ("GET", "POST"),
        _u("topics"),
        body=lambda w, m: {"name": "fresh-topic", "partitions": 1, "replication_factor": 1},
    ),
    "topic-config-definitions": Route(TENANT, ("GET",), _u("topic-config-definitions")),
    "topic-detail": Route(
        TENANT,
        ("GET", "PATCH", "DELETE"),
        _u("topic-detail", name=lambda w: w.b.topic.name),
        body=lambda w, m: {"configs": {"retention.ms": "1"}},
        detail=True,
    ),
    "topic-partitions": Route(
        TENANT,
        ("POST",),
        _u("topic-partitions", name=lambda w: w.b.topic.name),
        body=lambda w, m: {"partitions": 10},
        detail=True,
    ),
    "acls": Route(
        ADMIN,
        ("GET", "POST"),
        _u("acls"),
        body=lambda w, m: {
            "principal": "User:x",
            "resource_type": "TOPIC",
            "resource_name": "t",
            "operation": "READ",
        },
    ),
    "acl-detail": Route(
        ADMIN, ("GET", "DELETE"), _u("acl-detail", acl_id=lambda w: w.b.acl.id), detail=True
    ),
    "quotas": Route(
        ADMIN,
        ("GET", "POST"),
        _u("quotas"),
        body=lambda w, m: {
            "service_account_id": str(w.b.accounts[roles.MEMBER].id),
            "max_topics": 1,
        },
        detail=("POST",),
    ),
    "quota-detail": Route(
        ADMIN,
        ("GET", "PATCH", "DELETE"),
        _u("quota-detail", quota_id=lambda w: w.b.sa_quota.id),
        body=lambda w, m: {"max_topics": 1},
        detail=True,
    ),
    "audit": Route(ADMIN, ("GET",), _u("audit")),
    "platform-organisation-quota": Route(
        PLATFORM,
        ("GET", "PATCH"),
        _u("platform-organisation-quota", organisation=lambda w: w.b.org.slug),
        body=lambda w, m: {"max_topics": 100000},
    ),
    "internal-broker-register": Route(
        BROKER,
        ("POST",),
        _u("internal-broker-register"),
        body=lambda w, m: {"broker_id": 7, "url": "http://127.0.0.1:9099"},
    ),
    "internal-broker-heartbeat": Route(
        BROKER,
        ("POST",),
        _u("internal-broker-heartbeat"),
        body=lambda w, m: {"broker_id": 7, "metadata_version": 0},
    ),
    "internal-metadata": Route(BROKER, ("GET",), _u("internal-metadata")),
    "internal-alter-partition": Route(
        BROKER,
        ("POST",),
        _u("internal-alter-partition"),
        body=lambda w, m: {
            "broker_id": 7,
            "broker_epoch": _epoch(7),
            "topic_id": str(w.a.topic.topic_id),
            "partition": 0,
            "leader_epoch": 0,
            "partition_epoch": 0,
            "new_isr": [{"broker_id": 7, "broker_epoch": _epoch(7)}],
        },
    ),
    "internal-broker-controlled-shutdown": Route(
        BROKER,
        ("POST",),
        _u("internal-broker-controlled-shutdown"),
        body=lambda w, m: {"broker_id": 7, "broker_epoch": _epoch(7)},
    ),
    "internal-controller": Route(BROKER, ("GET",), _u("internal-controller")),
    "internal-partitions": Route(BROKER, ("GET",), _u("internal-partitions")),
    "internal-preferred-election": Route(
        BROKER, ("POST",), _u("internal-preferred-election"), body=lambda w, m: {}
    ),
    "internal-reassignment": Route(
        BROKER,
        ("POST", "DELETE"),
        _u("internal-reassignment"),
        body=lambda w, m: (
            {"topic_id": str(w.a.topic.topic_id), "partition": 0}
            | ({"replicas": [7]} if m == "POST" else {})
        ),
    ),
    "cluster-partitions": Route(TENANT, ("GET",), _u("cluster-partitions")),
    "console": Route(PUBLIC, ("GET",)),
    "console-brokers": Route(TENANT, ("GET",), _u("console-brokers")),
    "console-partitions": Route(TENANT, ("GET",), _u("console-partitions")),
    "console-traffic": Route(TENANT, ("GET",), _u("console-traffic")),
    "console-messages": Route(
        TENANT,
        ("GET", "POST"),
        _u("console-messages", name=lambda w: w.b.topic.name),
        body=lambda w, m: {"key": "k", "value": "v"},
        detail=True,
    ),
    "console-policy": Route(
        TENANT,
        ("GET", "PATCH"),
        _u("console-policy"),
        body=lambda w, m: {"allow_export": False},
        write_role=roles.ADMIN,
    ),
    # consumer groups live on the brokers (none run in these tests: 503 BROKERS_UNAVAILABLE
    # stands in for their answer, see BROKER_BACKED); tests/integration/groups covers them
    "groups": Route(TENANT, ("GET",), _u("groups")),
    "group-detail": Route(
        TENANT, ("GET", "DELETE"), _u("group-detail", group_id=lambda w: "b-group"), detail=True
    ),
    "group-reset-offsets": Route(
        TENANT,
        ("POST",),
        _u("group-reset-offsets", group_id=lambda w: "b-group"),
        body=lambda w, m: {"topic": w.b.topic.name, "strategy": "earliest"},
        detail=True,
    ),
    "group-reset-offsets-undo": Route(
        TENANT,
        ("POST",),
        _u("group-reset-offsets-undo", group_id=lambda w: "b-group", reset_id=lambda w: _RESET),
        detail=True,
    ),
    # analytics reports (docs/analytics.md; tests/unit/control/test_analytics_api.py)
    "report-runs": Route(
        TENANT,
        ("GET", "POST"),
        _u("report-runs"),
        body=lambda w, m: {"job": "usage"},
        write_role=roles.ADMIN,
    ),
    "report-lag": Route(TENANT, ("GET",), _u("report-lag")),
    "report-throughput": Route(TENANT, ("GET",), _u("report-throughput")),
    "report-retention": Route(TENANT, ("GET",), _u("report-retention")),
    "report-usage": Route(TENANT, ("GET",), _u("report-usage")),
    "report-peaks": Route(TENANT, ("GET",), _u("report-peaks")),
    "report-skew": Route(TENANT, ("GET",), _u("report-skew")),
    "report-compaction": Route(TENANT, ("GET",), _u("report-compaction")),
    "report-live-lag": Route(TENANT, ("GET",), _u("report-live-lag")),
    "report-live-throughput": Route(TENANT, ("GET",), _u("report-live-throughput")),
    **V3_ROUTES,
    **V2_ROUTES,
}

_RESET = "00000000-0000-4000-8000-000000000000"
BROKER_BACKED = {"groups", "group-detail", "group-reset-offsets"} | {
    name for name in V3_ROUTES if name.startswith(("v3-group", "v3-consumer", "v3-lag"))
}


def _brokers_unavailable(name: str, response) -> bool:
    """Routes answered by the brokers: with none running, 503 BROKERS_UNAVAILABLE."""
    if name in BROKER_BACKED and response.status_code == 503:
        body = response.json()
        assert body.get("sluice_code", body["error_code"]) == "BROKERS_UNAVAILABLE"
        return True
    return False


def _walk(patterns, prefix: str = ""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def _methods(pattern: URLPattern) -> set[str]:
    view_class = getattr(pattern.callback, "view_class", None) or getattr(
        pattern.callback, "cls", None
    )
    if view_class is None:  # a plain function view
        return {"GET"}
    return {
        m.upper()
        for m in view_class.http_method_names
        if m not in ("options", "head", "trace") and hasattr(view_class, m)
    }


def test_every_route_and_method_is_in_the_table():
    found = {}
    for route, pattern in _walk(get_resolver().url_patterns):
        assert pattern.name, f"route {route!r} has no name; name it and add it to ROUTES"
        found[pattern.name] = (route, _methods(pattern))
    missing = sorted(set(found) - set(ROUTES))
    assert not missing, f"routes not covered by tests/unit/control/test_routes.py: {missing}"
    stale = sorted(set(ROUTES) - set(found))
    assert not stale, f"ROUTES lists routes that no longer exist: {stale}"
    for name, (route, methods) in found.items():
        assert methods == set(ROUTES[name].methods), (
            f"{route}: the view answers {sorted(methods)}, the table says "
            f"{sorted(ROUTES[name].methods)}"
        )


def _cases(*kinds: str, writes_only: bool = False, reads_only: bool = False):
    for name, r in ROUTES.items():
        if r.kind not in kinds:
            continue
        for m in r.methods:
            if (writes_only and m == "GET") or (reads_only and m != "GET"):
                continue
            yield pytest.param(name, m, id=f"{m} {name}")


ISOLATION_CASES = [
    pytest.param(name, method, as_, id=f"{as_} {method} {name}")
    for as_ in ("admin-key", "owner-session")
    for name, r in ROUTES.items()
    for method in r.methods
    # user routes refuse API keys (test_api_keys_cannot_use_user_and_platform_routes)
    if r.kind in (TENANT, ADMIN) or (r.kind == USER and as_ == "owner-session")
]


def _call(client, world: World, name: str, method: str):
    r = ROUTES[name]
    url = r.url(world)
    body = r.body(world, method) if method != "GET" else None
    fn = getattr(client, method.lower())
    if body is None:
        return fn(url)
    return fn(url, data=json.dumps(body), content_type="application/json")


def _assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.content[:300])
    body = response.json()
    # Confluent's routes carry Sluice's code in sluice_code, beside their integer error_code
    assert body.get("sluice_code", body["error_code"]) == code, body
    assert isinstance(body["message"], str) and body["message"]


def _snapshot_b(world: World) -> tuple:
    b = world.b
    return (
        AuditEvent.objects.filter(organisation=b.org).count(),
        list(Topic.objects.filter(organisation=b.org).values_list("name", "partitions", "configs")),
        sorted(ApiKey.objects.filter(organisation=b.org).values_list("key_id", "revoked_at")),
    )


@pytest.mark.parametrize(("name", "method"), list(_cases(USER, TENANT, ADMIN, PLATFORM)))
def test_every_non_public_route_requires_authentication(world, name, method):
    anonymous = _call(APIClient(), world, name, method)
    _assert_error(anonymous, 401, "NOT_AUTHENTICATED")
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    forged = _call(key_client("slk_" + "x" * 16 + "." + "y" * 43), world, name, method)
    _assert_error(forged, 401, "NOT_AUTHENTICATED")


@pytest.mark.parametrize(("name", "method"), list(_cases(PUBLIC)))
def test_public_routes_answer_without_authentication(world, name, method):
    url = reverse(name)
    response = (
        APIClient().get(url)
        if method == "GET"
        else APIClient().post(
            url, data={"username": "alpha-owner", "password": "pw-alpha"}, format="json"
        )
    )
    assert response.status_code == 200, (name, response.status_code)


@pytest.mark.parametrize(("name", "method", "as_"), ISOLATION_CASES)
def test_tenant_isolation(world, name, method, as_):
    """Tenant A (an admin key, or the owner's session) cannot see or touch B's objects: 404
    on B's objects, and no B identifier in any answer; B's data and audit log unchanged."""
    r = ROUTES[name]
    if as_ == "admin-key":
        client = key_client(world.a.token(roles.ADMIN))
    else:
        client = session_client(world.a.users[roles.OWNER], world.a.org)
    before = _snapshot_b(world)
    response = _call(client, world, name, method)
    if _brokers_unavailable(name, response):
        pass
    elif r.detail is True or (r.detail and method in r.detail):
        _assert_error(response, 404, "NOT_FOUND")
    else:
        assert response.status_code < 400, (response.status_code, response.content[:300])
    text = response.content.decode()
    leaked = [i for i in world.b.identifiers() if i in text]
    assert not leaked, f"{method} {name} leaked tenant B's {leaked}"
    assert _snapshot_b(world) == before


@pytest.mark.parametrize(("name", "method"), list(_cases(TENANT, ADMIN)))
def test_naming_another_organisation_in_the_header_is_404(world, name, method):
    """A's owner naming B in X-Sluice-Organisation gets 404, as if B did not exist."""
    client = session_client(world.a.users[roles.OWNER], world.b.org)
    if name == "auth-me":  # me answers without a current organisation
        response = _call(client, world, name, method)
        assert response.json()["organisation"] is None
        return
    before = _snapshot_b(world)
    _assert_error(_call(client, world, name, method), 404, "NOT_FOUND")
    assert _snapshot_b(world) == before


def _own_url(world: World, name: str) -> Callable[[], str]:
    """The URL of A's own object for a route (so role checks are not masked by 404)."""
    a = world.a
    own = {
        "member-detail": {"membership_id": a.memberships[roles.READ_ONLY].id},
        "invitation-detail": {"invitation_id": a.invitation.id},
        "auth-invitation-accept": {"invitation_id": a.invitation.id},
        "auth-invitation-decline": {"invitation_id": a.invitation.id},
        "service-account-detail": {"service_account_id": a.accounts[roles.READ_ONLY].id},
        "api-key-detail": {"key_id": a.keys[roles.READ_ONLY].api_key.key_id},
        "topic-detail": {"name": a.topic.name},
        "topic-partitions": {"name": a.topic.name},
        "console-messages": {"name": a.topic.name},
        "acl-detail": {"acl_id": a.acl.id},
        "quota-detail": {"quota_id": a.sa_quota.id},
        "platform-organisation-quota": {"organisation": a.org.slug},
        "group-detail": {"group_id": "a-group"},
        "group-reset-offsets": {"group_id": "a-group"},
        "group-reset-offsets-undo": {"group_id": "a-group", "reset_id": _RESET},
    }
    if name in V3_ROUTES or name in V2_ROUTES:  # the same routes on A's own topic
        names = {"name": "retention.ms", "partition_id": 0, "broker_id": 7}
        own_topic = {"topic_name": a.topic.name, "group_id": "a-group", "consumer_id": "m1"}
        pattern = next(p for r, p in _walk(get_resolver().url_patterns) if p.name == name)
        wanted = set(pattern.pattern.converters)
        kwargs = {k: v for k, v in {**names, **own_topic}.items() if k in wanted}
        if "cluster_id" in wanted:
            kwargs["cluster_id"] = settings.SLUICE_CLUSTER_ID
        _with_broker()
        return reverse(name, kwargs=kwargs)
    return reverse(name, kwargs=own.get(name, {}))


@pytest.mark.parametrize(("name", "method"), list(_cases(ADMIN)))
@pytest.mark.parametrize("role", [roles.MEMBER, roles.READ_ONLY])
def test_admin_routes_refuse_non_admins(world, name, method, role):
    url = _own_url(world, name)
    body = json.dumps(ROUTES[name].body(world, method)) if method != "GET" else None
    for client in (key_client(world.a.token(role)), session_client(world.a.users[role])):
        response = getattr(client, method.lower())(url, data=body, content_type="application/json")
        _assert_error(response, 403, "PERMISSION_DENIED")


@pytest.mark.parametrize(("name", "method"), list(_cases(TENANT, writes_only=True)))
def test_read_only_cannot_write(world, name, method):
    url = _own_url(world, name)
    body = json.dumps(ROUTES[name].body(world, method))
    for client in (
        key_client(world.a.token(roles.READ_ONLY)),
        session_client(world.a.users[roles.READ_ONLY]),
    ):
        response = getattr(client, method.lower())(url, data=body, content_type="application/json")
        _assert_error(response, 403, "PERMISSION_DENIED")


@pytest.mark.parametrize(("name", "method"), list(_cases(TENANT, reads_only=True)))
def test_read_only_can_read(world, name, method):
    response = key_client(world.a.token(roles.READ_ONLY)).get(_own_url(world, name))
    ok = response.status_code == 200 or _brokers_unavailable(name, response)
    assert ok, response.content[:300]


@pytest.mark.parametrize(("name", "method"), list(_cases(USER, PLATFORM)))
def test_api_keys_cannot_use_user_and_platform_routes(world, name, method):
    response = _call(key_client(world.a.token(roles.ADMIN)), world, name, method)
    _assert_error(response, 403, "PERMISSION_DENIED")


@pytest.mark.parametrize(("name", "method"), list(_cases(PLATFORM)))
def test_platform_routes_are_staff_only(world, name, method):
    owner = session_client(world.a.users[roles.OWNER], world.a.org)
    _assert_error(_call(owner, world, name, method), 403, "PERMISSION_DENIED")
    staff = session_client(world.staff)
    assert _call(staff, world, name, method).status_code == 200


GARBAGE = [
    [],
    "text",
    123,
    None,
    {"a": {"b": [1, {"c": None}]}},
    {"name": "\u0000"},
    {"configs": {"\u0000": "\u0000"}},
    {"partitions": 1e309},
]


@pytest.mark.parametrize(
    ("name", "method"), list(_cases(USER, TENANT, ADMIN, PLATFORM, writes_only=True))
)
def test_garbage_bodies_never_cause_a_500(world, name, method):
    """Bad bodies get a 4xx with the error shape, never a crash (owner or staff, own URLs)."""
    client = (
        session_client(world.staff)
        if ROUTES[name].kind == PLATFORM
        else session_client(world.a.users[roles.OWNER], world.a.org)
    )
    url = _own_url(world, name)
    for body in GARBAGE:
        response = getattr(client, method.lower())(
            url, data=json.dumps(body), content_type="application/json"
        )
        unavailable = _brokers_unavailable(name, response)
        assert response.status_code < 500 or unavailable, (body, response.content[:300])
        if response.status_code >= 400:
            assert "error_code" in response.json()


@pytest.mark.parametrize(("name", "method"), list(_cases(BROKER)))
def test_broker_routes_need_the_cluster_secret(world, name, method):
    """Internal routes: no credentials, a wrong secret, a tenant's admin key or an owner's or
    staff session are all refused; the cluster secret is accepted."""
    for client in (
        APIClient(),
        key_client(world.a.token(roles.ADMIN)),
        session_client(world.a.users[roles.OWNER], world.a.org),
        session_client(world.staff),
    ):
        _assert_error(_call(client, world, name, method), 401, "NOT_AUTHENTICATED")
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Cluster not-the-secret")
    _assert_error(_call(wrong, world, name, method), 401, "NOT_AUTHENTICATED")
    broker = APIClient()
    broker.credentials(HTTP_AUTHORIZATION=f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    _call(broker, world, "internal-broker-register", "POST")
    assert _call(broker, world, name, method).status_code == 200
