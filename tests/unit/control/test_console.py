"""The console app's control-plane side: filters, the derived console key, the export
policy, browse input checks, the SPA route with its Content-Security-Policy, and the live
tail's refusals. Reading from real brokers is covered end to end in tests/e2e."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from backend.cluster.models import MetadataRecord
from backend.console import credentials
from backend.console.filters import (
    InvalidJsonPath,
    header_matches,
    json_path_matches,
    parse_json_path,
)
from backend.keys import tokens
from backend.keys.models import ApiKey
from backend.tenancy import roles
from backend.tenancy.models import ServiceAccount

from .conftest import session_client

# --- pure filters -----------------------------------------------------------------------


def test_json_path_grammar_and_resolution():
    doc = {"order": {"items": [{"sku": "A-1", "qty": 2}], "paid": True, "a b": None}}
    assert parse_json_path("$.order.items[0].sku").resolve(doc) == (True, "A-1")
    assert parse_json_path('$["order"]["a b"]').resolve(doc) == (True, None)
    assert parse_json_path("$").resolve(doc) == (True, doc)
    assert parse_json_path("$.order.items[5]").resolve(doc) == (False, None)
    assert parse_json_path("$.order.paid.x").resolve(doc) == (False, None)
    path = parse_json_path("$.order.items[0].qty")
    assert json_path_matches(path, doc, "json", "2")
    assert not json_path_matches(path, doc, "json", "3")
    assert json_path_matches(parse_json_path("$.order.paid"), doc, "json", "true")
    assert json_path_matches(path, doc, "json", None)  # exists
    assert not json_path_matches(path, "text payload", "text", None)


@pytest.mark.parametrize(
    "bad",
    ["order.id", "$..x", "$.a()", "$[?(@.x)]", "$.__import__('os')", "$[-1]", "$." + "a" * 300],
)
def test_json_paths_that_are_not_paths_are_refused(bad):
    with pytest.raises(InvalidJsonPath):
        parse_json_path(bad)


def test_header_filter_matches_decoded_values():
    headers = [{"name": "source", "value": "ZTJl"}, {"name": "empty", "value": None}]
    assert header_matches(headers, "source", "e2e")
    assert header_matches(headers, "source", None)
    assert header_matches(headers, "empty", None)
    assert not header_matches(headers, "source", "other")
    assert not header_matches(headers, "missing", None)


# --- the console key ----------------------------------------------------------------------


def test_console_key_secret_is_derived_and_only_its_hash_is_stored(world):
    org = world.a.org
    token = credentials.console_token(org)
    key_id, secret = tokens.parse_token(token)
    sa = ServiceAccount.objects.get(organisation=org, name=credentials.CONSOLE_SERVICE_ACCOUNT)
    assert sa.role == roles.MEMBER
    key = ApiKey.objects.get(pk=key_id)
    assert key.service_account == sa and key.secret_sha256 == tokens.hash_secret(secret)
    assert secret not in str(list(ApiKey.objects.values()))
    assert secret == credentials.derive_secret("sluice-test-cluster-secret", str(org.id), key_id)
    # published to the brokers like any key (its hash, never the secret)
    rec = MetadataRecord.objects.filter(kind="api_key", key=f"slk_{key_id}").last()
    assert rec.value["secret_sha256"] == key.secret_sha256 and secret not in str(rec.value)
    # the same key next time; another organisation gets another one
    assert credentials.console_token(org) == token
    other = credentials.console_token(world.b.org)
    assert other != token and tokens.parse_token(other)[1] != secret


def test_console_key_follows_a_rotated_cluster_secret_and_a_revocation(world):
    org = world.a.org
    first = credentials.console_token(org)
    with override_settings(SLUICE_CLUSTER_SECRET="rotated"):
        rotated = credentials.console_token(org)
    assert rotated.split(".")[0] == first.split(".")[0] and rotated != first
    key = ApiKey.objects.get(pk=tokens.parse_token(rotated)[0])
    assert tokens.secret_matches(tokens.parse_token(rotated)[1], key.secret_sha256)
    ApiKey.objects.filter(pk=key.pk).update(revoked_at="2026-01-01T00:00:00Z")
    assert credentials.console_token(org).split(".")[0] != first.split(".")[0]


def test_deactivated_console_account_and_missing_cluster_secret_are_refused(world):
    org = world.a.org
    credentials.console_token(org)
    ServiceAccount.objects.filter(name=credentials.CONSOLE_SERVICE_ACCOUNT).update(is_active=False)
    with pytest.raises(credentials.ConsoleKeyDisabled):
        credentials.console_token(org)
    with override_settings(SLUICE_CLUSTER_SECRET=""), pytest.raises(credentials.ConsoleUnavailable):
        credentials.console_token(world.b.org)


# --- routes -------------------------------------------------------------------------------


def test_export_policy_defaults_on_and_admins_turn_it_off(world):
    owner = session_client(world.a.users[roles.OWNER], world.a.org)
    member = session_client(world.a.users[roles.MEMBER], world.a.org)
    assert owner.get("/api/v1/console/policy").json() == {"allow_export": True}
    r = member.patch("/api/v1/console/policy", {"allow_export": False}, format="json")
    assert r.status_code == 403 and r.json()["error_code"] == "PERMISSION_DENIED"
    r = owner.patch("/api/v1/console/policy", {"allow_export": False}, format="json")
    assert r.json() == {"allow_export": False}
    topic = world.a.topic.name
    r = member.get(f"/api/v1/console/topics/{topic}/messages?export=csv")
    assert r.status_code == 403 and r.json()["error_code"] == "EXPORT_DISABLED"
    # B's policy is its own
    b = session_client(world.b.users[roles.OWNER], world.b.org)
    assert b.get("/api/v1/console/policy").json() == {"allow_export": True}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=offset", "offset"),
        ("start=timestamp", "timestamp"),
        ("json_path=$..x", "json_path"),
        ("limit=0", "limit"),
        ("partition=99", "partition"),
        ("start=sideways", "start"),
    ],
)
def test_browse_input_errors_name_the_field(world, query, field):
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    r = client.get(f"/api/v1/console/topics/{world.a.topic.name}/messages?{query}")
    assert r.status_code == 400, r.content
    assert field in r.json().get("fields", {}), r.json()


def test_browse_without_a_live_leader_says_so(world):
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    r = client.get(f"/api/v1/console/topics/{world.a.topic.name}/messages")
    assert r.status_code == 200
    assert r.json()["records"] == [] and "no live leader" in r.json()["unavailable"]


def test_console_routes_serve_the_app_with_a_strict_csp(client, tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><div id=root></div>")
    with override_settings(SLUICE_CONSOLE_DIST=tmp_path):
        for path in ("/", "/topics/orders/messages", "/access/api-keys"):
            r = client.get(path)
            assert r.status_code == 200 and b"id=root" in r.content, path
            csp = r["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
            assert "frame-ancestors 'none'" in csp
            assert r.cookies.get("csrftoken") is not None
    r = client.get("/api/v1/no-such-route")
    assert r.status_code == 404 and r.json()["error_code"] == "NOT_FOUND"
    assert client.post("/").status_code == 405


def test_unbuilt_console_says_how_to_build_it(client, tmp_path):
    with override_settings(SLUICE_CONSOLE_DIST=tmp_path / "missing"):
        r = client.get("/")
    assert r.status_code == 200 and b"make up" in r.content


# --- the live tail's refusals (the working path runs in tests/e2e) -----------------------


def _tail(headers, path="/ws/console/tail?topic=t"):
    from backend.asgi import application

    async def go():
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    return asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_live_tail_refuses_foreign_origins_and_anonymous_browsers():
    connected, _ = _tail([(b"origin", b"https://evil.example"), (b"host", b"127.0.0.1")])
    assert not connected
    connected, code = _tail([(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1")])
    assert not connected and code == 4401


def test_brokers_count_only_this_tenants_partitions(world):
    from django.utils import timezone

    from backend.cluster.models import Broker, PartitionAssignment

    Broker.objects.create(broker_id=1, url="http://127.0.0.1:1", last_heartbeat_at=timezone.now())
    PartitionAssignment.objects.update(leader=1)
    mine = PartitionAssignment.objects.filter(topic__organisation=world.a.org).count()
    assert 0 < mine < PartitionAssignment.objects.count()
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    [broker] = client.get("/api/v1/console/brokers").json()
    assert broker["broker_id"] == 1 and broker["live"] is True
    assert broker["leader_partitions"] == mine
    assert broker["kafka"] is None  # no Kafka listener registered


def test_brokers_show_their_kafka_listener(world):
    from backend.cluster import services

    services.broker_register(broker_id=1, url="http://127.0.0.1:1", kafka="127.0.0.1:29092")
    services.broker_register(broker_id=2, url="http://127.0.0.1:2")
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    brokers = {b["broker_id"]: b for b in client.get("/api/v1/console/brokers").json()}
    assert brokers[1]["kafka"] == "127.0.0.1:29092"
    assert brokers[2]["kafka"] is None
