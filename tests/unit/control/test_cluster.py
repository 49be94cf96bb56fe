"""The cluster app: placement (pure), the metadata log (versions, deltas, image, compaction),
the publishers hooked into the other apps' services, and the internal broker routes."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest
from django.conf import settings
from django.db import transaction
from rest_framework.test import APIClient

from backend.acls.services import acl_create, acl_delete
from backend.cluster import metadata_log, services
from backend.cluster.models import Broker, MetadataRecord, PartitionAssignment
from backend.cluster.placement import BrokerLoad, ClusterLoad, place
from backend.core.context import RequestContext
from backend.keys.services import api_key_create, api_key_revoke
from backend.keys.tokens import broker_key_id
from backend.tenancy import roles
from backend.tenancy.services import service_account_delete, service_account_update
from backend.topics.services import (
    topic_add_partitions,
    topic_alter_configs,
    topic_create,
    topic_delete,
)

# --- placement (pure) ------------------------------------------------------------------


def test_place_balances_leaders_and_replicas():
    lists = place([1, 2, 3], 6, 3)
    assert all(len(r) == 3 and len(set(r)) == 3 for r in lists)
    leaders = Counter(r[0] for r in lists)
    assert leaders == {1: 2, 2: 2, 3: 2}
    replicas = Counter(b for r in lists for b in r)
    assert replicas == {1: 6, 2: 6, 3: 6}


def test_place_counts_existing_load_across_topics():
    load = ClusterLoad.of([[1, 2], [1, 3], [1, 2]], [1, 2, 3])
    assert load.brokers[1] == BrokerLoad(leaders=3, replicas=3)
    lists = place([1, 2, 3], 3, 1, load)
    assert sorted(r[0] for r in lists) == [2, 2, 3] or sorted(r[0] for r in lists) == [2, 3, 3]
    assert 1 not in {r[0] for r in lists}  # the busy broker gets no new leader


def test_place_one_partition_per_topic_rotates_leaders():
    load = ClusterLoad.of([], [1, 2, 3])
    leaders = []
    for _ in range(6):
        (replicas,) = place([1, 2, 3], 1, 2, load)
        leaders.append(replicas[0])
        load = ClusterLoad.of([*([r] for r in []), *load_lists(load), replicas], [1, 2, 3])
    assert Counter(leaders) == {1: 2, 2: 2, 3: 2}


def load_lists(load: ClusterLoad) -> list[list[int]]:
    """Replica lists with the same counts as ``load`` (leader-only entries, then followers)."""
    out: list[list[int]] = []
    for b, bl in load.brokers.items():
        out += [[b]] * bl.leaders
        out += [[-1, b]] * (bl.replicas - bl.leaders)
    return out


def test_place_caps_replication_factor_and_handles_no_brokers():
    assert place([4], 2, 3) == [[4], [4]]
    assert place([], 3, 3) == [[], [], []]
    assert place([1, 2], 0, 1) == []
    for _ in range(3):  # deterministic
        assert place([3, 1, 2], 4, 2) == place([1, 2, 3], 4, 2)


# --- the metadata log -------------------------------------------------------------------


def records(since: int = 0) -> list[dict]:
    return [r.as_dict() for r in MetadataRecord.objects.filter(version__gt=since)]


@pytest.mark.django_db
def test_versions_are_monotonic_and_the_head_follows():
    v0, _ = metadata_log.head()
    with transaction.atomic():
        a = metadata_log.append("broker", "1", {"id": 1, "url": "http://x"})
        b = metadata_log.append("broker", "2", {"id": 2, "url": "http://y"})
    assert (a, b) == (v0 + 1, v0 + 2)
    assert metadata_log.head()[0] == b


@pytest.mark.django_db
def test_a_rolled_back_change_leaves_no_record():
    v0, _ = metadata_log.head()
    with pytest.raises(RuntimeError), transaction.atomic():
        metadata_log.append("broker", "9", {"id": 9, "url": "http://z"})
        raise RuntimeError("the change failed")
    assert metadata_log.head()[0] == v0
    assert not MetadataRecord.objects.filter(key="9").exists()


@pytest.mark.django_db
def test_delta_image_and_compaction():
    with transaction.atomic():
        metadata_log.append("broker", "1", {"id": 1, "url": "http://a"})
        v = metadata_log.append("broker", "2", {"id": 2, "url": "http://b"})
        metadata_log.append("broker", "1", {"id": 1, "url": "http://a2"})
        metadata_log.append("broker", "2", None)
    delta = metadata_log.read_since(v)
    assert not delta.reset and [r["key"] for r in delta.records] == ["1", "2"]
    image = metadata_log.read_since(0)
    assert image.reset and [(r["key"], r["value"]["url"]) for r in image.records] == [
        ("1", "http://a2")
    ]
    head, _ = metadata_log.head()
    assert metadata_log.read_since(head + 5).reset  # a broker ahead of a reset log
    deleted = metadata_log.compact(keep_tombstones=0)
    assert deleted == 3  # two superseded records and the tombstone
    _, start = metadata_log.head()
    assert start == head
    assert metadata_log.read_since(v).reset  # the log no longer goes back that far
    assert metadata_log.image().records == image.records


@pytest.mark.django_db
def test_compaction_keeps_recent_tombstones_for_deltas():
    with transaction.atomic():
        metadata_log.append("broker", "1", {"id": 1, "url": "http://a"})
        v = metadata_log.append("broker", "1", None)
    metadata_log.compact(keep_tombstones=1000)
    assert metadata_log.head()[1] == 0
    after = metadata_log.read_since(v - 1)
    assert not after.reset and after.records[-1]["value"] is None


@pytest.mark.django_db
def test_long_poll_waits_for_a_change_and_is_bounded(monkeypatch):
    """A commit elsewhere is simulated: the record exists but the head hides it until the
    'commit' (a flag flipped by another thread, which also wakes the waiters), so no two
    threads touch the in-memory test database at once."""
    with transaction.atomic():
        head = metadata_log.append("broker", "4", {"id": 4, "url": "http://d"})
    started = time.monotonic()
    empty = metadata_log.read_since(head, wait_ms=300)
    assert empty.records == [] and empty.version == head
    assert 0.25 <= time.monotonic() - started < 2
    with transaction.atomic():
        metadata_log.append("broker", "5", {"id": 5, "url": "http://e"})
    committed = threading.Event()
    real_head = metadata_log.head
    monkeypatch.setattr(
        metadata_log,
        "head",
        lambda: real_head() if committed.is_set() else (head, real_head()[1]),
    )
    monkeypatch.setattr(metadata_log, "POLL_INTERVAL_S", 10.0)  # only the wake-up can end it

    def commit_soon():
        time.sleep(0.3)
        committed.set()
        metadata_log._notify()

    t = threading.Thread(target=commit_soon)
    started = time.monotonic()
    t.start()
    got = metadata_log.read_since(head, wait_ms=5000)
    t.join()
    assert [r["key"] for r in got.records] == ["5"]
    assert 0.25 <= time.monotonic() - started < 2


# --- publishers, called by the services -------------------------------------------------


def owner_ctx(tenant):
    return RequestContext.system(tenant.org, role=roles.OWNER)


def latest(kind: str, key: str) -> dict | None:
    r = MetadataRecord.objects.filter(kind=kind, key=key).order_by("-version").first()
    assert r is not None, (kind, key)
    return r.value


@pytest.mark.django_db
def test_topic_changes_append_records_with_assignments(world):
    a = world.a
    for b in (1, 2, 3):
        services.broker_register(broker_id=b, url=f"http://127.0.0.1:{9090 + b}/")
    ctx = owner_ctx(a)
    t = topic_create(ctx=ctx, name="payments", partitions=3, replication_factor=2)
    doc = latest("topic", str(t.topic_id))
    assert doc["name"] == "payments" and doc["organisation"] == str(a.org.id)
    parts = doc["partitions"]
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert all(len(p["replicas"]) == 2 and p["leader"] == p["replicas"][0] for p in parts)
    # broker 1 already leads the world's six partitions (placed when it registered alone)
    assert {p["leader"] for p in parts} == {2, 3}
    topic_alter_configs(ctx=ctx, topic=t, changes={"retention.ms": 60000})
    assert latest("topic", str(t.topic_id))["configs"] == {"retention.ms": "60000"}
    topic_add_partitions(ctx=ctx, topic=t, partitions=5)
    doc = latest("topic", str(t.topic_id))
    assert len(doc["partitions"]) == 5 and doc["partitions"][0] == parts[0]  # old ones kept
    topic_delete(ctx=ctx, topic=t)
    assert latest("topic", str(t.topic_id)) is None
    assert not PartitionAssignment.objects.filter(topic_id=t.pk).exists()


@pytest.mark.django_db
def test_partitions_created_without_brokers_are_placed_when_one_registers(world):
    t = world.a.topic  # created with no broker registered
    doc = latest("topic", str(t.topic_id))
    assert all(p["leader"] == -1 and p["replicas"] == [] for p in doc["partitions"])
    services.broker_register(broker_id=4, url="http://127.0.0.1:9094")
    doc = latest("topic", str(t.topic_id))
    assert all(p["leader"] == 4 and p["replicas"] == [4] for p in doc["partitions"])
    broker = latest("broker", "4")
    assert broker["id"] == 4 and broker["url"] == "http://127.0.0.1:9094"
    assert broker["epoch"] > 0 and broker["fenced"] is False


@pytest.mark.django_db
def test_key_acl_quota_and_service_account_changes_are_published(world):
    a = world.a
    ctx = owner_ctx(a)
    created = a.keys[roles.MEMBER]
    key = broker_key_id(created.api_key.key_id)
    doc = latest("api_key", key)
    assert doc["principal"] == f"User:{a.accounts[roles.MEMBER].name}"
    assert doc["organisation"] == str(a.org.id) and doc["role"] == roles.MEMBER
    assert doc["secret_sha256"] == created.api_key.secret_sha256
    assert created.token.split(".", 1)[1] not in json.dumps(records())  # never the secret
    service_account_update(ctx=ctx, service_account=a.accounts[roles.MEMBER], role="read-only")
    assert latest("api_key", key)["role"] == "read-only"
    service_account_update(ctx=ctx, service_account=a.accounts[roles.MEMBER], is_active=False)
    assert latest("api_key", key) is None
    api_key_revoke(ctx=ctx, api_key=a.keys[roles.ADMIN].api_key)
    assert latest("api_key", broker_key_id(a.keys[roles.ADMIN].api_key.key_id)) is None
    sa = a.accounts[roles.READ_ONLY]
    other = api_key_create(ctx=ctx, service_account=sa)
    quota_id = str(a.sa_quota.id)
    assert latest("quota", quota_id)["principal"] == f"User:{sa.name}"
    service_account_delete(ctx=ctx, service_account=sa)
    assert latest("api_key", broker_key_id(other.api_key.key_id)) is None
    assert latest("quota", quota_id) is None
    assert latest("quota", str(a.org_quota.id))["principal"] is None
    acl_id = str(a.acl.id)
    acl_doc = latest("acl", acl_id)
    assert acl_doc["organisation"] == str(a.org.id) and acl_doc["permission"] == "ALLOW"
    acl_delete(ctx=ctx, binding=a.acl)
    assert latest("acl", acl_id) is None
    b = acl_create(
        ctx=ctx,
        principal="User:x",
        resource_type="TOPIC",
        resource_name="t",
        operation="WRITE",
        permission="DENY",
    )
    assert latest("acl", str(b.id))["permission"] == "DENY"


# --- internal routes --------------------------------------------------------------------


def broker_client() -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    return c


@pytest.mark.django_db
def test_register_heartbeat_and_pull(world):
    c = broker_client()
    r = c.post(
        "/internal/v1/brokers/register",
        {"broker_id": 1, "url": "http://127.0.0.1:9092"},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["cluster_id"] == settings.SLUICE_CLUSTER_ID
    assert Broker.objects.get(broker_id=1).url == "http://127.0.0.1:9092"
    r = c.post("/internal/v1/brokers/heartbeat", {"broker_id": 1, "metadata_version": 3}, "json")
    assert r.status_code == 200 and Broker.objects.get(broker_id=1).metadata_version == 3
    r = c.post("/internal/v1/brokers/heartbeat", {"broker_id": 2}, format="json")
    assert r.status_code == 404  # register first
    image = c.get("/internal/v1/metadata").json()
    assert image["reset"] is True
    kinds = Counter(rec["kind"] for rec in image["records"])
    tenant_topics = [
        r
        for r in image["records"]
        if r["kind"] == "topic" and not r["value"]["name"].startswith("__")
    ]
    assert len(tenant_topics) == 2 and kinds["broker"] == 1 and kinds["api_key"] == 6
    v = image["version"]
    assert c.get(f"/internal/v1/metadata?since={v}&wait_ms=0").json()["records"] == []
    topic_create(ctx=owner_ctx(world.a), name="fresh", partitions=1, replication_factor=1)
    delta = c.get(f"/internal/v1/metadata?since={v}").json()
    assert delta["reset"] is False and [x["value"]["name"] for x in delta["records"]] == ["fresh"]
    assert delta["version"] > v


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/internal/v1/metadata?since=-1",
        "/internal/v1/metadata?since=x",
        "/internal/v1/metadata?wait_ms=999999999",
        "/internal/v1/metadata?bogus=1",
    ],
)
def test_bad_metadata_queries_are_400(world, url):
    r = broker_client().get(url)
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["brokers/register", "brokers/heartbeat"])
@pytest.mark.parametrize(
    "body", [[], "text", 1, None, {"broker_id": -1, "url": "x"}, {"broker_id": 1e309}]
)
def test_garbage_broker_bodies_are_400(world, path, body):
    r = broker_client().post(
        f"/internal/v1/{path}", data=json.dumps(body), content_type="application/json"
    )
    assert r.status_code == 400, r.content
    assert "error_code" in r.json()


@pytest.mark.django_db
def test_internal_routes_refuse_when_no_secret_is_configured(world, settings):
    settings.SLUICE_CLUSTER_SECRET = ""
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION="Cluster ")
    assert c.get("/internal/v1/metadata").status_code == 401
    c.credentials(HTTP_AUTHORIZATION="Cluster anything")
    assert c.get("/internal/v1/metadata").status_code == 401


@pytest.mark.django_db
def test_replication_factor_is_capped_by_live_brokers(world):
    from backend.core.exceptions import InvalidConfig

    services.broker_register(broker_id=1, url="http://127.0.0.1:9092")
    ctx = owner_ctx(world.a)
    with pytest.raises(InvalidConfig) as e:
        topic_create(ctx=ctx, name="wide", replication_factor=2)
    assert "replication_factor" in e.value.fields
    t = topic_create(ctx=ctx, name="narrow")  # the default fits the live brokers
    assert t.replication_factor == 1
    Broker.objects.update(last_heartbeat_at="2000-01-01T00:00:00Z")  # session expired
    assert topic_create(ctx=ctx, name="later", replication_factor=3).replication_factor == 3


@pytest.mark.django_db
def test_a_broker_coming_back_takes_partitions_created_while_none_was_live(world):
    broker = services.broker_register(broker_id=2, url="http://127.0.0.1:9093")
    Broker.objects.update(last_heartbeat_at="2000-01-01T00:00:00Z")
    t = topic_create(ctx=owner_ctx(world.a), name="orphan", partitions=2, replication_factor=1)
    assert all(p["leader"] == -1 for p in latest("topic", str(t.topic_id))["partitions"])
    broker.refresh_from_db()
    services.broker_heartbeat(broker=broker, metadata_version=1)
    assert all(p["leader"] == 2 for p in latest("topic", str(t.topic_id))["partitions"])
