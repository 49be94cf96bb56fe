"""Topics API: lifecycle, validation with field errors, validate_only, quotas."""

from __future__ import annotations

import pytest

from backend.audit.models import AuditEvent
from backend.quotas.selectors import quota_for_organisation
from backend.topics.configs import normalise_configs, topic_name_errors
from backend.topics.models import Topic

URL = "/api/v1/topics/"


def _post(client, body):
    return client.post(URL, body, format="json")


def test_lifecycle(world, a_owner):
    created = _post(
        a_owner,
        {
            "name": "payments.v1",
            "partitions": 6,
            "replication_factor": 3,
            "configs": {"cleanup.policy": "delete,compact", "retention.ms": 60000},
        },
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["partitions"] == 6 and body["replication_factor"] == 3
    assert body["configs"] == {"cleanup.policy": "compact,delete", "retention.ms": "60000"}
    assert body["effective_configs"]["segment.bytes"] == str(1024**3)
    assert body["validate_only"] is False
    topic_id = body["topic_id"]

    names = [t["name"] for t in a_owner.get(URL).json()]
    assert names == ["alpha-orders", "payments.v1"]
    assert [t["name"] for t in a_owner.get(URL + "?prefix=pay").json()] == ["payments.v1"]
    assert a_owner.get(URL + "payments.v1").json()["topic_id"] == topic_id

    altered = a_owner.patch(
        URL + "payments.v1",
        {"configs": {"retention.ms": None, "min.insync.replicas": 2}},
        format="json",
    )
    assert altered.status_code == 200, altered.content
    assert altered.json()["configs"] == {
        "cleanup.policy": "compact,delete",
        "min.insync.replicas": "2",
    }

    grown = a_owner.post(URL + "payments.v1/partitions", {"partitions": 8}, format="json")
    assert grown.status_code == 200 and grown.json()["partitions"] == 8
    shrink = a_owner.post(URL + "payments.v1/partitions", {"partitions": 2}, format="json")
    assert shrink.status_code == 400
    assert shrink.json()["error_code"] == "INVALID_CONFIG"
    assert "partitions" in shrink.json()["fields"]

    assert a_owner.delete(URL + "payments.v1").status_code == 204
    assert a_owner.get(URL + "payments.v1").status_code == 404
    again = _post(a_owner, {"name": "payments.v1"}).json()
    assert again["topic_id"] != topic_id  # a re-created name is a new topic
    assert again["partitions"] == 1 and again["replication_factor"] == 3  # defaults


def test_same_name_in_two_organisations_is_fine_and_duplicates_conflict(world, a_owner):
    assert _post(a_owner, {"name": world.b.topic.name}).status_code == 201
    dup = _post(a_owner, {"name": world.a.topic.name})
    assert dup.status_code == 409
    assert dup.json()["error_code"] == "TOPIC_ALREADY_EXISTS"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "bad name"}, "name"),
        ({"name": "."}, "name"),
        ({"name": ".."}, "name"),
        ({"name": "__consumer_offsets"}, "name"),
        ({"name": "x" * 250}, "name"),
        ({"name": "t", "partitions": 0}, "partitions"),
        ({"name": "t", "partitions": 10001}, "partitions"),
        ({"name": "t", "replication_factor": 0}, "replication_factor"),
        ({"name": "t", "replication_factor": 4}, "replication_factor"),
        ({"name": "t", "configs": {"retention.ms": 0}}, "retention.ms"),
        ({"name": "t", "configs": {"retention.ms": -2}}, "retention.ms"),
        ({"name": "t", "configs": {"retention.ms": "soon"}}, "retention.ms"),
        ({"name": "t", "configs": {"retention.bytes": -5}}, "retention.bytes"),
        ({"name": "t", "configs": {"cleanup.policy": "archive"}}, "cleanup.policy"),
        ({"name": "t", "configs": {"segment.bytes": 10}}, "segment.bytes"),
        ({"name": "t", "configs": {"segment.ms": 0}}, "segment.ms"),
        ({"name": "t", "configs": {"max.message.bytes": 0}}, "max.message.bytes"),
        ({"name": "t", "configs": {"max.message.bytes": 2**30}}, "max.message.bytes"),
        ({"name": "t", "configs": {"message.timestamp.type": "Now"}}, "message.timestamp.type"),
        (
            {"name": "t", "replication_factor": 2, "configs": {"min.insync.replicas": 3}},
            "min.insync.replicas",
        ),
        ({"name": "t", "configs": {"compression.level": 3}}, "compression.level"),
        ({"name": "t", "configs": {"retention.ms": True}}, "retention.ms"),
        ({"name": "t", "configs": {"retention.ms": {"a": 1}}}, "retention.ms"),
        ({"name": "t", "configs": {"min.cleanable.dirty.ratio": 2}}, "min.cleanable.dirty.ratio"),
    ],
)
def test_invalid_settings_get_field_errors(world, a_owner, body, field):
    response = _post(a_owner, body)
    assert response.status_code == 400, response.content
    payload = response.json()
    assert payload["error_code"] == "INVALID_CONFIG", payload
    assert field in payload["fields"], payload
    assert all(isinstance(m, str) for m in payload["fields"][field])


def test_all_errors_are_reported_together(world, a_owner):
    response = _post(
        a_owner,
        {"name": "..", "partitions": 0, "configs": {"retention.ms": 0, "cleanup.policy": "x"}},
    )
    assert set(response.json()["fields"]) == {
        "name",
        "partitions",
        "retention.ms",
        "cleanup.policy",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"name": "t", "partitions": "many"},
        {"name": "t", "configs": "retention.ms=1"},
        {"name": 5},
        {},
        [],
        {"name": "t", "partitions": 10**20},
    ],
)
def test_bad_bodies_are_400_never_500(world, a_owner, body):
    response = _post(a_owner, body)
    assert response.status_code == 400, response.content
    assert response.json()["error_code"] == "INVALID_REQUEST"


def test_malformed_json_is_400(world, a_owner):
    response = a_owner.post(URL, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_REQUEST"


def test_validate_only_creates_nothing(world, a_owner):
    topics, events = Topic.objects.count(), AuditEvent.objects.count()
    response = _post(a_owner, {"name": "dry", "partitions": 4, "validate_only": True})
    assert response.status_code == 200, response.content
    assert response.json()["validate_only"] is True
    assert response.json()["topic_id"] is None
    # validate_only still runs every check
    assert _post(a_owner, {"name": "alpha-orders", "validate_only": True}).status_code == 409
    bad = _post(a_owner, {"name": "dry", "configs": {"segment.ms": 0}, "validate_only": True})
    assert bad.status_code == 400
    patched = a_owner.patch(
        URL + "alpha-orders",
        {"configs": {"retention.ms": 5}, "validate_only": True},
        format="json",
    )
    assert patched.status_code == 200 and patched.json()["configs"]["retention.ms"] == "5"
    grown = a_owner.post(
        URL + "alpha-orders/partitions", {"partitions": 9, "validate_only": True}, format="json"
    )
    assert grown.status_code == 200 and grown.json()["partitions"] == 9
    assert Topic.objects.count() == topics and AuditEvent.objects.count() == events
    topic = Topic.objects.get(name="alpha-orders")
    assert topic.partitions == 3 and topic.configs == {"retention.ms": "3600000"}


def test_partition_and_topic_quotas(world, a_owner):
    quota = quota_for_organisation(organisation=world.a.org)
    quota.max_partitions, quota.max_topics = 10, 3
    quota.save()
    over = _post(a_owner, {"name": "big", "partitions": 8})  # 3 exist
    assert over.status_code == 400
    assert over.json()["error_code"] == "QUOTA_EXCEEDED"
    assert "partitions" in over.json()["fields"]
    assert _post(a_owner, {"name": "ok", "partitions": 7}).status_code == 201
    grow = a_owner.post(URL + "ok/partitions", {"partitions": 8}, format="json")
    assert grow.json()["error_code"] == "QUOTA_EXCEEDED"
    quota.max_partitions = None
    quota.save()
    assert _post(a_owner, {"name": "third"}).status_code == 201
    fourth = _post(a_owner, {"name": "fourth"})
    assert fourth.json()["error_code"] == "QUOTA_EXCEEDED" and "name" in fourth.json()["fields"]


def test_max_replication_factor_setting(world, a_owner, settings):
    settings.SLUICE_MAX_REPLICATION_FACTOR = 5
    assert _post(a_owner, {"name": "five", "replication_factor": 5}).status_code == 201
    settings.SLUICE_MAX_REPLICATION_FACTOR = 1
    assert _post(a_owner, {"name": "one"}).json()["replication_factor"] == 1


def test_pure_validation_helpers():
    assert topic_name_errors("ok.name_1-x") == []
    assert topic_name_errors("__internal", allow_internal=True) == []
    out, errors = normalise_configs(
        {"retention.ms": -1, "retention.bytes": "-1", "min.cleanable.dirty.ratio": "0.25"},
        replication_factor=1,
    )
    assert errors == {}
    assert out == {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "min.cleanable.dirty.ratio": "0.25",
    }
