"""The Brokers page's API against a real broker process on loopback: what the broker says of
itself (version, uptime, disk, counts, non-secret settings) with the operators' credential,
the controller's partition counts per broker, "down" and "unreachable" instead of zeros, and
that a tenant sees only its own partitions' names. Also the quotas' usage beside the limits."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from django.conf import settings
from django.utils import timezone

from backend.cluster.models import Broker, PartitionAssignment
from backend.tenancy import roles
from harness.broker import API_KEY, BrokerLauncher, free_port

from .conftest import session_client


@pytest.fixture
def real_broker(tmp_path):
    """One static-metadata broker holding the cluster secret, with one record produced."""
    launcher = BrokerLauncher(tmp_path)
    try:
        b = launcher(
            {"orders": (2, {})}, env={"SLUICE_CLUSTER_SECRET": settings.SLUICE_CLUSTER_SECRET}
        )
        req = urllib.request.Request(
            f"{b.url}/v3/clusters/{b.cluster_id}/topics/orders/records",
            data=json.dumps({"value": {"type": "STRING", "data": "x" * 500}}).encode(),
            headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
        yield b
    finally:
        launcher.close()


def _get(url: str, authorization: str | None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"Authorization": authorization or ""})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_broker_route_is_for_operators_and_describes_the_broker(real_broker):
    url = f"{real_broker.url}/sluice/v1/broker"
    status, doc = _get(url, f"Bearer {API_KEY}")
    assert status == 401 and doc["error_code"] == "UNAUTHENTICATED"
    status, doc = _get(url, f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    assert status == 200, doc
    assert doc["version"] and doc["version"] != "unknown"
    assert 0 <= doc["uptime_s"] < 600 and doc["started_at_ms"] > 1_700_000_000_000
    assert doc["partitions"] == 2 and doc["leaders"] == 2 and doc["under_replicated"] == 0
    (log_dir,) = doc["log_dirs"]
    assert log_dir["path"] == str(real_broker.data_dir)
    assert log_dir["log_bytes"] > 500  # the record's batch
    assert 0 < log_dir["free_bytes"] <= log_dir["total_bytes"]
    configs = doc["configs"]
    assert configs["max_request_bytes"] > 0 and "fsync" in configs
    assert not {"cluster_secret", "kafka_tls_key", "control_plane_url"} & set(configs)
    assert settings.SLUICE_CLUSTER_SECRET not in json.dumps(doc)


def _register(broker_id: int, url: str, *, live: bool = True) -> Broker:
    when = timezone.now() if live else timezone.now() - timezone.timedelta(hours=1)
    return Broker.objects.create(broker_id=broker_id, url=url, last_heartbeat_at=when)


def test_console_brokers_live_down_and_unreachable(world, real_broker):
    _register(1, real_broker.url)
    _register(2, f"http://127.0.0.1:{free_port()}")  # heartbeats, but nothing listens
    _register(3, f"http://127.0.0.1:{free_port()}", live=False)
    # alpha's topic: partitions 0-2 on broker 1, partition 2 lost broker 2 from its ISR;
    # bravo's: one under-replicated partition led by broker 1 (counted, never named)
    PartitionAssignment.objects.filter(topic=world.a.topic).update(
        replicas=[1, 2], isr=[1, 2], leader=1
    )
    PartitionAssignment.objects.filter(topic=world.a.topic, partition=2).update(isr=[1])
    PartitionAssignment.objects.filter(topic=world.b.topic, partition=0).update(
        replicas=[1, 3], isr=[1], leader=1
    )
    PartitionAssignment.objects.filter(topic=world.b.topic, partition__gt=0).update(
        replicas=[3], isr=[3], leader=3
    )
    client = session_client(world.a.users[roles.READ_ONLY], world.a.org)
    r = client.get("/api/v1/console/brokers")
    assert r.status_code == 200, r.content
    by_id = {b["broker_id"]: b for b in r.json()}

    one = by_id[1]
    assert one["live"] and one["info_error"] is None
    assert one["info"]["hosted_partitions"] == 2  # the real broker's own logs
    assert one["info"]["log_dirs"][0]["log_bytes"] > 500
    assert one["info"]["version"] and one["info"]["uptime_s"] >= 0
    assert "leader_bytes_by_tenant" not in json.dumps(one)
    assert (one["partitions"], one["leaders"], one["under_replicated"]) == (4, 4, 2)
    assert one["leader_partitions"] == 3  # alpha's
    assert one["your_under_replicated"] == [{"topic": world.a.topic.name, "partition": 2}]

    two = by_id[2]
    assert two["live"] and two["info"] is None
    assert two["info_error"].startswith("unreachable: ")
    assert (two["partitions"], two["leaders"], two["out_of_isr"]) == (3, 0, 1)

    three = by_id[3]
    assert not three["live"] and three["info"] is None and three["info_error"].startswith("down")
    assert (three["partitions"], three["leaders"], three["out_of_isr"]) == (3, 2, 1)

    # bravo sees the same counts, and its own partition's name, not alpha's
    b = session_client(world.b.users[roles.READ_ONLY], world.b.org).get("/api/v1/console/brokers")
    b_one = {x["broker_id"]: x for x in b.json()}[1]
    assert b_one["under_replicated"] == 2
    assert b_one["your_under_replicated"] == [{"topic": world.b.topic.name, "partition": 0}]


def test_quota_usage_beside_the_limits(world, real_broker):
    client = session_client(world.a.users[roles.ADMIN], world.a.org)
    rows = client.get("/api/v1/quotas/").json()
    org_row = next(q for q in rows if q["scope"] == "organisation")
    sa_row = next(q for q in rows if q["scope"] == "service_account")
    assert sa_row["usage"] is None
    # no live broker yet: stored bytes are not measured (null), not 0
    assert org_row["usage"] == {
        "topics": 1,
        "partitions": 3,
        "storage_bytes": None,
        "storage_partial": False,
    }
    _register(1, real_broker.url)  # a static broker: its partitions belong to no tenant
    usage = next(q for q in client.get("/api/v1/quotas/").json() if q["scope"] == "organisation")
    assert usage["usage"]["storage_bytes"] == 0 and not usage["usage"]["storage_partial"]
    _register(2, f"http://127.0.0.1:{free_port()}")
    usage = next(q for q in client.get("/api/v1/quotas/").json() if q["scope"] == "organisation")
    assert usage["usage"]["storage_partial"]
