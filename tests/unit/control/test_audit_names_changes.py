"""The audit log names what an event touched (a topic by name, not its UUID; a group by its
id) and lists what changed, field by field."""

from __future__ import annotations

from backend.audit.describe import changes, object_name
from backend.tenancy import roles

from .conftest import key_client


def test_changes_are_field_by_field_with_nested_configs():
    before = {"name": "t", "partitions": 1, "configs": {"retention.ms": "1000", "a": "x"}}
    after = {"name": "t", "partitions": 2, "configs": {"retention.ms": "2000", "b": "y"}}
    assert changes(before, after) == [
        {"field": "configs.a", "before": "x", "after": None},
        {"field": "configs.b", "before": None, "after": "y"},
        {"field": "configs.retention.ms", "before": "1000", "after": "2000"},
        {"field": "partitions", "before": 1, "after": 2},
    ]
    assert changes(None, {"name": "n"}) == [{"field": "name", "before": None, "after": "n"}]
    assert changes({"name": "n"}, None) == [{"field": "name", "before": "n", "after": None}]
    assert changes(None, None) == []


def test_object_names():
    assert object_name("group", "orders-app", None, None) == "orders-app"
    assert object_name("topic", "5f0c...", {"name": "old"}, None) == "old"
    assert object_name("service_account", "12", None, {"name": "etl"}) == "etl"
    assert object_name("acl", "7", {"id": 7}, None) is None


def test_the_audit_api_names_the_topic_and_says_what_changed(world):
    client = key_client(world.a.token(roles.ADMIN))
    client.post("/api/v1/topics/", {"name": "audit-names", "replication_factor": 1}, format="json")
    patched = client.patch(
        "/api/v1/topics/audit-names", {"configs": {"retention.ms": 60000}}, format="json"
    )
    assert patched.status_code == 200, patched.content
    topic_id = patched.json()["topic_id"]
    page = client.get("/api/v1/audit?action=topic.alter_configs").json()
    (event,) = [e for e in page["results"] if e["object_id"] == topic_id]
    assert event["object_name"] == "audit-names"
    assert event["changes"] == [{"field": "configs.retention.ms", "before": None, "after": "60000"}]
    created = client.get("/api/v1/audit?action=topic.create").json()["results"]
    assert {e["object_name"] for e in created} >= {"audit-names"}
