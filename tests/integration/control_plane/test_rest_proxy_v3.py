"""Confluent REST Proxy API v3's admin resources against the real control plane views
(Django's test client, real services and database): the requests of Confluent's API
reference, answered with its shapes (kinds, metadata, related links, lists), values that
match what /api/v1 sees, Confluent's error body with Sluice's string code beside the integer
one, and each tenant seeing only its own topics, by their plain names."""

from __future__ import annotations

import pytest

from backend.audit.models import AuditEvent
from backend.tenancy import roles
from backend.topics.models import Topic

from .restproxy_world import ConfluentClient, World, world_fixture  # noqa: F401

BASE = "http://testserver"


def assert_error(doc, status: int, response, code: int, sluice_code: str) -> None:
    assert response.status_code == status, doc
    assert doc["error_code"] == code, doc
    assert doc["sluice_code"] == sluice_code, doc
    assert isinstance(doc["message"], str) and doc["message"], doc


def test_list_clusters_names_this_cluster_with_its_related_resources(world: World):
    status, doc, _ = world.alpha.client(roles.READ_ONLY).get("/v3/clusters")
    assert status == 200, doc
    assert doc["kind"] == "KafkaClusterList"
    assert doc["metadata"] == {"self": f"{BASE}/v3/clusters", "next": None}
    (cluster,) = doc["data"]
    cid = world.cluster_id
    url = f"{BASE}/v3/clusters/{cid}"
    assert cluster == {
        "kind": "KafkaCluster",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}"},
        "cluster_id": cid,
        "controller": {"related": f"{url}/brokers/1"},
        "acls": {"related": f"{url}/acls"},
        "brokers": {"related": f"{url}/brokers"},
        "broker_configs": {"related": f"{url}/broker-configs"},
        "consumer_groups": {"related": f"{url}/consumer-groups"},
        "topics": {"related": f"{url}/topics"},
        "partition_reassignments": {"related": f"{url}/topics/-/partitions/-/reassignment"},
    }
    status, one, _ = world.alpha.client().get(world.v3)
    assert status == 200 and one == cluster


def test_a_wrong_cluster_id_is_404_with_both_codes(world: World):
    _, doc, response = world.alpha.client().get("/v3/clusters/not-this-one/topics")
    assert_error(doc, 404, response, 404, "NOT_FOUND")
    assert world.cluster_id in doc["message"]


def test_without_a_key_is_401_and_a_wrong_key_too(world: World):
    _, doc, response = ConfluentClient(None).get(world.v3 + "/topics")
    assert_error(doc, 401, response, 40101, "NOT_AUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Bearer")
    _, doc, response = ConfluentClient("slk_" + "x" * 16 + "." + "y" * 43).get("/v3/clusters")
    assert_error(doc, 401, response, 40101, "NOT_AUTHENTICATED")


def test_an_unknown_v3_path_is_confluents_404(world: World):
    _, doc, response = world.alpha.client().get(world.v3 + "/no-such-resource")
    assert_error(doc, 404, response, 404, "NOT_FOUND")


def test_create_topic_as_documented_then_list_get_and_delete(world: World):
    c = world.alpha.client(roles.MEMBER)
    request = {
        "topic_name": "topic-X",
        "partitions_count": 4,
        "replication_factor": 2,
        "configs": [
            {"name": "cleanup.policy", "value": "compact"},
            {"name": "retention.ms", "value": "86400000"},
        ],
    }
    status, doc, _ = c.call("POST", world.v3 + "/topics", request)
    assert status == 201, doc
    url = f"{BASE}{world.v3}/topics/topic-X"
    assert doc == {
        "kind": "KafkaTopic",
        "metadata": {
            "self": url,
            "resource_name": f"crn:///kafka={world.cluster_id}/topic=topic-X",
        },
        "cluster_id": world.cluster_id,
        "topic_name": "topic-X",
        "is_internal": False,
        "replication_factor": 2,
        "partitions_count": 4,
        "partitions": {"related": f"{url}/partitions"},
        "configs": {"related": f"{url}/configs"},
        "partition_reassignments": {"related": f"{url}/partitions/-/reassignment"},
        "authorized_operations": [],
    }
    # the same topic /api/v1 and the audit log see, created by the same service
    topic = Topic.objects.get(organisation=world.alpha.org, name="topic-X")
    assert (topic.partitions, topic.replication_factor) == (4, 2)
    assert topic.configs == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert AuditEvent.objects.filter(organisation=world.alpha.org, action="topic.create").exists()

    status, listing, _ = c.get(world.v3 + "/topics")
    assert status == 200 and listing["kind"] == "KafkaTopicList"
    assert listing["metadata"] == {"self": f"{BASE}{world.v3}/topics", "next": None}
    assert [t["topic_name"] for t in listing["data"]] == ["alpha-orders", "topic-X"]
    assert listing["data"][1] == doc
    assert c.get(world.v3 + "/topics/topic-X")[1] == doc

    status, body, _ = c.call("DELETE", world.v3 + "/topics/topic-X")
    assert (status, body) == (204, None)
    assert not Topic.objects.filter(name="topic-X").exists()
    _, doc, response = c.get(world.v3 + "/topics/topic-X")
    assert_error(doc, 404, response, 40403, "NOT_FOUND")


def test_create_topic_defaults_and_validate_only(world: World):
    c = world.alpha.client(roles.MEMBER)
    status, doc, _ = c.call("POST", world.v3 + "/topics", {"topic_name": "defaults"})
    assert status == 201, doc
    assert doc["partitions_count"] >= 1 and doc["replication_factor"] >= 1
    body = {"topic_name": "dry", "partitions_count": 2, "validate_only": True}
    status, doc, _ = c.call("POST", world.v3 + "/topics", body)
    assert status == 200 and doc["topic_name"] == "dry", doc
    assert not Topic.objects.filter(name="dry").exists()


@pytest.mark.parametrize(
    ("body", "status", "code", "sluice_code", "names"),
    [
        ({"topic_name": "alpha-orders"}, 400, 40002, "TOPIC_ALREADY_EXISTS", "already exists"),
        ({"topic_name": "t", "partitions_count": 0}, 400, 40002, "INVALID_CONFIG", "partitions"),
        ({"topic_name": "t", "replication_factor": 9}, 400, 40002, "INVALID_CONFIG", "replication"),
        ({"topic_name": "bad/name"}, 400, 40002, "INVALID_CONFIG", "name"),
        (
            {"topic_name": "t", "configs": [{"name": "retention.ms", "value": "soon"}]},
            400,
            40002,
            "INVALID_CONFIG",
            "retention.ms",
        ),
        (
            {"topic_name": "t", "configs": [{"name": "no.such.config", "value": "1"}]},
            400,
            40002,
            "INVALID_CONFIG",
            "no.such.config",
        ),
        (
            {"topic_name": "t", "replicas_assignments": [{"partition_id": 0, "broker_ids": [1]}]},
            400,
            40002,
            "INVALID_REQUEST",
            "replicas_assignments",
        ),
        ({}, 422, 422, "INVALID_REQUEST", "topic_name"),
        ({"topic_name": "t", "partitions": 3}, 422, 422, "INVALID_REQUEST", "partitions"),
        ({"topic_name": 5}, 422, 422, "INVALID_REQUEST", "topic_name"),
    ],
)
def test_create_topic_refusals(world: World, body, status, code, sluice_code, names):
    before = Topic.objects.count()
    _, doc, response = world.alpha.client(roles.MEMBER).call("POST", world.v3 + "/topics", body)
    assert_error(doc, status, response, code, sluice_code)
    assert names in doc["message"], doc
    assert Topic.objects.count() == before


def test_a_malformed_body_is_400(world: World):
    c = world.alpha.client(roles.MEMBER)
    _, doc, response = c.call("POST", world.v3 + "/topics", "{not json")
    assert_error(doc, 400, response, 400, "INVALID_REQUEST")


def test_read_only_keys_read_but_cannot_write(world: World):
    c = world.alpha.client(roles.READ_ONLY)
    assert c.get(world.v3 + "/topics/alpha-orders")[0] == 200
    _, doc, response = c.call("POST", world.v3 + "/topics", {"topic_name": "nope"})
    assert_error(doc, 403, response, 40301, "PERMISSION_DENIED")
    _, doc, response = c.call("DELETE", world.v3 + "/topics/alpha-orders")
    assert_error(doc, 403, response, 40301, "PERMISSION_DENIED")
    path = world.v3 + "/topics/alpha-orders/configs/retention.ms"
    _, doc, response = c.call("PUT", path, {"value": "1000"})
    assert_error(doc, 403, response, 40301, "PERMISSION_DENIED")


def test_tenants_see_only_their_own_topics_by_plain_names(world: World):
    a, b = world.alpha.client(), world.bravo.client()
    names = [t["topic_name"] for t in b.get(world.v3 + "/topics")[1]["data"]]
    assert names == ["bravo-orders"]
    for path in (
        "/topics/alpha-orders",
        "/topics/alpha-orders/configs",
        "/topics/alpha-orders/configs/retention.ms",
        "/topics/alpha-orders/partitions",
        "/topics/alpha-orders/partitions/0",
        "/topics/alpha-orders/partitions/0/replicas",
    ):
        _, doc, response = b.get(world.v3 + path)
        assert_error(doc, 404, response, 40403, "NOT_FOUND")
        assert a.get(world.v3 + path)[0] == 200, path
    before = Topic.objects.get(name="alpha-orders").configs
    _, doc, response = b.call(
        "PUT", world.v3 + "/topics/alpha-orders/configs/retention.ms", {"value": "1"}
    )
    assert_error(doc, 404, response, 40403, "NOT_FOUND")
    _, doc, response = b.call("DELETE", world.v3 + "/topics/alpha-orders")
    assert_error(doc, 404, response, 40403, "NOT_FOUND")
    assert Topic.objects.get(name="alpha-orders").configs == before
    # bravo may create its own topic of the same plain name
    status, doc, _ = b.call("POST", world.v3 + "/topics", {"topic_name": "alpha-orders"})
    assert status == 201 and doc["topic_name"] == "alpha-orders", doc


def test_topic_configs_list_get_update_reset_and_alter(world: World):
    c = world.alpha.client(roles.MEMBER)
    base = world.v3 + "/topics/alpha-orders/configs"
    status, doc, _ = c.get(base)
    assert status == 200 and doc["kind"] == "KafkaTopicConfigList", doc
    configs = {d["name"]: d for d in doc["data"]}
    retention = configs["retention.ms"]
    url = f"{BASE}{base}/retention.ms"
    assert retention == {
        "kind": "KafkaTopicConfig",
        "metadata": {
            "self": url,
            "resource_name": f"crn:///kafka={world.cluster_id}/topic=alpha-orders"
            "/config=retention.ms",
        },
        "cluster_id": world.cluster_id,
        "topic_name": "alpha-orders",
        "name": "retention.ms",
        "value": "3600000",
        "is_default": False,
        "is_read_only": False,
        "is_sensitive": False,
        "source": "DYNAMIC_TOPIC_CONFIG",
        "synonyms": [
            {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
            {"name": "retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"},
        ],
    }
    policy = configs["cleanup.policy"]
    assert (policy["value"], policy["is_default"], policy["source"]) == (
        "delete",
        True,
        "DEFAULT_CONFIG",
    )
    assert c.get(base + "/retention.ms")[1] == retention

    assert c.call("PUT", base + "/cleanup.policy", {"value": "compact"})[0] == 204
    doc = c.get(base + "/cleanup.policy")[1]
    assert (doc["value"], doc["is_default"], doc["source"]) == (
        "compact",
        False,
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert c.call("DELETE", base + "/retention.ms")[0] == 204
    doc = c.get(base + "/retention.ms")[1]
    assert (doc["value"], doc["is_default"]) == ("604800000", True)

    alter = {
        "data": [
            {"name": "retention.ms", "value": "7200000"},
            {"name": "cleanup.policy", "operation": "DELETE"},
            {"name": "segment.bytes", "value": "1048576", "operation": "SET"},
        ]
    }
    status, body, _ = c.call("POST", base + ":alter", alter)
    assert (status, body) == (204, None)
    assert Topic.objects.get(name="alpha-orders").configs == {
        "retention.ms": "7200000",
        "segment.bytes": "1048576",
    }
    dry = {"data": [{"name": "retention.ms", "value": "1"}], "validate_only": True}
    assert c.call("POST", base + ":alter", dry)[0] == 204
    assert Topic.objects.get(name="alpha-orders").configs["retention.ms"] == "7200000"


def test_topic_config_refusals(world: World):
    c = world.alpha.client(roles.MEMBER)
    base = world.v3 + "/topics/alpha-orders/configs"
    _, doc, response = c.call("PUT", base + "/retention.ms", {"value": "-7"})
    assert_error(doc, 400, response, 40002, "INVALID_CONFIG")
    assert "retention.ms" in doc["message"] and doc["fields"]["retention.ms"]
    _, doc, response = c.call("PUT", base + "/no.such.config", {"value": "1"})
    assert_error(doc, 400, response, 40002, "INVALID_CONFIG")
    _, doc, response = c.get(base + "/no.such.config")
    assert_error(doc, 404, response, 404, "NOT_FOUND")
    _, doc, response = c.call("PUT", base + "/retention.ms", {})
    assert_error(doc, 422, response, 422, "INVALID_REQUEST")
    bad_alters = [
        {"data": []},
        {"data": [{"name": "retention.ms"}]},
        {"data": [{"name": "retention.ms", "value": "1", "operation": "APPEND"}]},
    ]
    for body in bad_alters:
        _, doc, response = c.call("POST", base + ":alter", body)
        assert_error(doc, 422, response, 422, "INVALID_REQUEST")
    # all or nothing: one bad value changes nothing
    body = {
        "data": [
            {"name": "segment.bytes", "value": "1048576"},
            {"name": "retention.ms", "value": "x"},
        ]
    }
    _, doc, response = c.call("POST", base + ":alter", body)
    assert_error(doc, 400, response, 40002, "INVALID_CONFIG")
    assert Topic.objects.get(name="alpha-orders").configs == {"retention.ms": "3600000"}


def test_partitions_and_replicas(world: World):
    c = world.alpha.client(roles.READ_ONLY)
    base = world.v3 + "/topics/alpha-orders/partitions"
    status, doc, _ = c.get(base)
    assert status == 200 and doc["kind"] == "KafkaPartitionList", doc
    assert [p["partition_id"] for p in doc["data"]] == [0, 1, 2]
    topic = Topic.objects.get(name="alpha-orders")
    for p in doc["data"]:
        a = topic.assignments.get(partition=p["partition_id"])
        url = f"{BASE}{base}/{p['partition_id']}"
        assert p == {
            "kind": "KafkaPartition",
            "metadata": {
                "self": url,
                "resource_name": f"crn:///kafka={world.cluster_id}/topic=alpha-orders"
                f"/partition={p['partition_id']}",
            },
            "cluster_id": world.cluster_id,
            "topic_name": "alpha-orders",
            "partition_id": p["partition_id"],
            "leader": {"related": f"{url}/replicas/{a.leader}"},
            "replicas": {"related": f"{url}/replicas"},
            "reassignment": {"related": f"{url}/reassignment"},
        }
        assert c.get(f"{base}/{p['partition_id']}")[1] == p
        status, replicas, _ = c.get(f"{base}/{p['partition_id']}/replicas")
        assert status == 200 and replicas["kind"] == "KafkaReplicaList"
        assert [r["broker_id"] for r in replicas["data"]] == a.replicas
        for r in replicas["data"]:
            assert r["is_leader"] == (r["broker_id"] == a.leader)
            assert r["is_in_sync"] == (r["broker_id"] in a.isr)
            assert r["broker"] == {"related": f"{BASE}{world.v3}/brokers/{r['broker_id']}"}
            one = c.get(f"{base}/{p['partition_id']}/replicas/{r['broker_id']}")[1]
            assert one == r
    _, doc, response = c.get(base + "/3")
    assert_error(doc, 404, response, 40403, "NOT_FOUND")


def test_brokers(world: World):
    c = world.bravo.client(roles.READ_ONLY)
    status, doc, _ = c.get(world.v3 + "/brokers")
    assert status == 200 and doc["kind"] == "KafkaBrokerList", doc
    url = f"{BASE}{world.v3}/brokers"
    assert doc["data"] == [
        {
            "kind": "KafkaBroker",
            "metadata": {
                "self": f"{url}/1",
                "resource_name": f"crn:///kafka={world.cluster_id}/broker=1",
            },
            "cluster_id": world.cluster_id,
            "broker_id": 1,
            "host": "127.0.0.1",
            "port": 19091,  # its Kafka listener
            "rack": None,
        },
        {
            "kind": "KafkaBroker",
            "metadata": {
                "self": f"{url}/2",
                "resource_name": f"crn:///kafka={world.cluster_id}/broker=2",
            },
            "cluster_id": world.cluster_id,
            "broker_id": 2,
            "host": "127.0.0.1",
            "port": 9092,  # no Kafka listener: its HTTP address
            "rack": None,
        },
    ]
    assert c.get(world.v3 + "/brokers/2")[1] == doc["data"][1]
    _, doc, response = c.get(world.v3 + "/brokers/7")
    assert_error(doc, 404, response, 404, "NOT_FOUND")


def test_links_follow_the_host_a_broker_forwards(world: World):
    c = world.alpha.client()
    status, doc, _ = c.get(
        "/v3/clusters", HTTP_X_FORWARDED_HOST="127.0.0.1:8082", HTTP_X_FORWARDED_PROTO="https"
    )
    assert status == 200
    assert doc["metadata"]["self"] == "https://127.0.0.1:8082/v3/clusters"
    status, doc, _ = c.get("/v3/clusters", HTTP_X_FORWARDED_HOST="bad host/evil")
    assert doc["metadata"]["self"] == f"{BASE}/v3/clusters"


ACL = {
    "resource_type": "TOPIC",
    "resource_name": "alpha-",
    "pattern_type": "PREFIXED",
    "principal": "User:alpha-reader",
    "host": "*",
    "operation": "READ",
    "permission": "ALLOW",
}


def test_acls_create_search_and_delete(world: World):
    c = world.alpha.client(roles.ADMIN)
    base = world.v3 + "/acls"
    status, body, _ = c.call("POST", base, ACL)
    assert (status, body) == (201, None)
    assert c.call("POST", base, ACL)[0] == 201  # exists already: still created, once
    literal = {
        **ACL,
        "resource_name": "alpha-orders",
        "pattern_type": "LITERAL",
        "operation": "WRITE",
    }
    assert c.call("POST", base, literal)[0] == 201

    status, doc, _ = c.get(base)
    assert status == 200 and doc["kind"] == "KafkaAclList", doc
    assert doc["metadata"] == {"self": f"{BASE}{base}", "next": None}
    assert len(doc["data"]) == 2
    prefixed = next(a for a in doc["data"] if a["pattern_type"] == "PREFIXED")
    assert {k: prefixed[k] for k in ACL} == ACL
    assert prefixed["kind"] == "KafkaAcl" and prefixed["cluster_id"] == world.cluster_id
    assert prefixed["metadata"]["self"].startswith(f"{BASE}{base}?resource_type=TOPIC")

    # Confluent's filters: MATCH finds every binding that applies to a name
    found = c.get(base + "?resource_type=TOPIC&resource_name=alpha-orders&pattern_type=MATCH")[1]
    assert len(found["data"]) == 2
    found = c.get(base + "?resource_name=alpha-orders")[1]  # ANY: the exact name
    assert [a["operation"] for a in found["data"]] == ["WRITE"]
    found = c.get(base + "?operation=READ&permission=ALLOW&principal=User:alpha-reader")[1]
    assert [a["pattern_type"] for a in found["data"]] == ["PREFIXED"]
    assert c.get(base + "?resource_type=GROUP")[1]["data"] == []

    status, doc, _ = c.call("DELETE", base + "?resource_type=TOPIC&operation=WRITE")
    assert status == 200, doc
    assert [a["resource_name"] for a in doc["data"]] == ["alpha-orders"]
    assert len(c.get(base)[1]["data"]) == 1


def test_acl_refusals_and_roles(world: World):
    base = world.v3 + "/acls"
    _, doc, response = world.alpha.client(roles.MEMBER).get(base)
    assert_error(doc, 403, response, 40301, "PERMISSION_DENIED")
    c = world.alpha.client(roles.ADMIN)
    _, doc, response = c.get(base + "?resource_type=SOMETHING")
    assert_error(doc, 422, response, 422, "INVALID_REQUEST")
    _, doc, response = c.call("DELETE", base)
    assert_error(doc, 422, response, 422, "INVALID_REQUEST")
    assert "resource_type" in doc["message"]
    _, doc, response = c.call("POST", base, {**ACL, "operation": "FLY"})
    assert_error(doc, 400, response, 40002, "INVALID_REQUEST")
    assert "operation" in doc["message"]


def test_tenants_see_only_their_own_acls(world: World):
    world.alpha.client().call("POST", world.v3 + "/acls", ACL)
    b = world.bravo.client()
    assert b.get(world.v3 + "/acls")[1]["data"] == []
    status, doc, _ = b.call("DELETE", world.v3 + "/acls?resource_type=ANY")
    assert (status, doc["data"]) == (200, [])
    assert len(world.alpha.client().get(world.v3 + "/acls")[1]["data"]) == 1


def test_consumer_groups_without_live_brokers_are_a_retriable_503(world: World):
    c = world.alpha.client()
    from backend.cluster.models import Broker

    Broker.objects.update(fenced=True)
    for path in ("/consumer-groups", "/consumer-groups/g1", "/consumer-groups/g1/lags"):
        _, doc, response = c.get(world.v3 + path)
        assert_error(doc, 503, response, 503, "BROKERS_UNAVAILABLE")
