"""REST Proxy API v2's metadata reads against the real control plane views: Confluent's v2
shapes as ``application/vnd.kafka.v2+json``, v2's own not-found codes (40401 topic, 40402
partition), tenant scoping, and the console's pages still served to browsers on the same
paths."""

from __future__ import annotations

from backend.tenancy import roles
from backend.topics.models import Topic

from .restproxy_world import ConfluentClient, World, world_fixture  # noqa: F401

V2 = "application/vnd.kafka.v2+json"


def test_topic_names(world: World):
    status, names, response = world.alpha.client(roles.READ_ONLY).get("/topics", HTTP_ACCEPT=V2)
    assert (status, names) == (200, ["alpha-orders"])
    assert response["Content-Type"] == V2
    # curl's */* and plain JSON are answered too
    status, names, response = world.bravo.client().get("/topics", HTTP_ACCEPT="*/*")
    assert (status, names) == (200, ["bravo-orders"])
    status, _, response = world.bravo.client().get("/topics", HTTP_ACCEPT="application/json")
    assert status == 200 and response["Content-Type"] == "application/json"


def test_topic_with_configs_and_partitions(world: World):
    c = world.alpha.client(roles.READ_ONLY)
    status, doc, response = c.get("/topics/alpha-orders", HTTP_ACCEPT=V2)
    assert status == 200, doc
    assert response["Content-Type"] == V2
    assert doc["name"] == "alpha-orders"
    assert doc["configs"]["retention.ms"] == "3600000"  # the override
    assert doc["configs"]["cleanup.policy"] == "delete"  # Kafka's default
    topic = Topic.objects.get(name="alpha-orders")
    expected = []
    for a in topic.assignments.order_by("partition"):
        expected.append(
            {
                "partition": a.partition,
                "leader": a.leader,
                "replicas": [
                    {"broker": b, "leader": b == a.leader, "in_sync": b in a.isr}
                    for b in a.replicas
                ],
            }
        )
    assert len(expected) == 3 and all(p["leader"] in (1, 2) for p in expected)
    assert doc["partitions"] == expected
    assert c.get("/topics/alpha-orders/partitions", HTTP_ACCEPT=V2)[1] == expected
    assert c.get("/topics/alpha-orders/partitions/2", HTTP_ACCEPT=V2)[1] == expected[2]


def test_brokers(world: World):
    status, doc, response = world.bravo.client(roles.READ_ONLY).get("/brokers", HTTP_ACCEPT=V2)
    assert (status, doc) == (200, {"brokers": [1, 2]})
    assert response["Content-Type"] == V2


def test_v2_not_found_codes_and_tenancy(world: World):
    b = world.bravo.client()
    for path in ("/topics/alpha-orders", "/topics/alpha-orders/partitions"):
        status, doc, _ = b.get(path, HTTP_ACCEPT=V2)
        assert (status, doc["error_code"], doc["sluice_code"]) == (404, 40401, "NOT_FOUND"), path
        assert "alpha" not in doc["message"]
    status, doc, _ = b.get("/topics/bravo-orders/partitions/3", HTTP_ACCEPT=V2)
    assert (status, doc["error_code"], doc["sluice_code"]) == (404, 40402, "NOT_FOUND")
    status, doc, response = ConfluentClient(None).get("/topics", HTTP_ACCEPT=V2)
    assert (status, doc["error_code"], doc["sluice_code"]) == (401, 40101, "NOT_AUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Bearer")
    status, doc, _ = world.alpha.client().call("POST", "/topics", {"name": "x"})
    assert (status, doc["error_code"], doc["sluice_code"]) == (405, 405, "METHOD_NOT_ALLOWED")


def test_an_accept_v2_cannot_answer_is_406(world: World):
    status, doc, _ = world.alpha.client().get("/topics", HTTP_ACCEPT="application/xml")
    assert (status, doc["error_code"], doc["sluice_code"]) == (406, 40601, "NOT_ACCEPTABLE")


def test_browsers_still_get_the_console_on_the_same_paths(world: World):
    browser = ConfluentClient(None)
    html = "text/html,application/xhtml+xml,*/*;q=0.8"
    for path in ("/topics", "/topics/alpha-orders", "/brokers"):
        response = browser.http.get(path, HTTP_ACCEPT=html)
        assert response.status_code == 200, path
        assert response["Content-Type"].startswith("text/html"), path
    # a key in the request makes it an API call, whatever it accepts
    status, names, _ = world.alpha.client().get("/topics", HTTP_ACCEPT=html)
    assert (status, names) == (200, ["alpha-orders"])
