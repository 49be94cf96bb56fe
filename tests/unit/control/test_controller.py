"""The controller on the Django test database: the lease (acquire, renew, expiry, a deposed
controller writes nothing), broker epochs and fencing, elections on broker death (ISR, ELR,
unclean only when the topic opts in), AlterPartition, controlled shutdown, reassignments,
preferred leaders, partition increase, and the partition-health views."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from backend.audit.models import AuditEvent
from backend.cluster import controller, metadata_log, partition_services, selectors, services
from backend.cluster import lease as leases
from backend.cluster.models import Broker, ControllerLease, MetadataRecord, PartitionAssignment
from backend.core.context import RequestContext
from backend.core.exceptions import InvalidConfig
from backend.tenancy import roles
from backend.topics.services import topic_add_partitions, topic_alter_configs, topic_create

from .conftest import key_client


def cluster_client() -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Cluster {settings.SLUICE_CLUSTER_SECRET}")
    return c


def ctx(tenant):
    return RequestContext.system(tenant.org, role=roles.OWNER)


def register(*ids: int, clean: bool = True) -> dict[int, int]:
    """Register brokers; their epochs."""
    return {
        i: services.broker_register(
            broker_id=i, url=f"http://127.0.0.1:{9090 + i}", clean_shutdown=clean
        ).epoch
        for i in ids
    }


def expire(*ids: int) -> None:
    old = timezone.now() - timedelta(seconds=settings.SLUICE_BROKER_SESSION_TIMEOUT_S + 5)
    Broker.objects.filter(broker_id__in=ids).update(last_heartbeat_at=old)


def row(topic, p: int = 0) -> PartitionAssignment:
    return PartitionAssignment.objects.get(topic=topic, partition=p)


def latest_topic_record(topic) -> dict:
    r = MetadataRecord.objects.filter(kind="topic", key=str(topic.topic_id)).last()
    return r.value


def take_lease(holder: str = "c1") -> leases.Lease:
    lease = leases.acquire(holder, duration_s=5)
    assert lease is not None
    return lease


@pytest.fixture
def cluster(world):
    """Brokers 1-3 and tenant A's topic ``replicated`` (3 partitions, RF 3, min ISR 2)."""
    epochs = register(1, 2, 3)
    topic = topic_create(
        ctx=ctx(world.a),
        name="replicated",
        partitions=3,
        replication_factor=3,
        configs={"min.insync.replicas": "2"},
    )
    return world, topic, epochs


# --- the lease ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_lease_one_holder_renewal_expiry_and_takeover():
    first = take_lease("c1")
    assert leases.acquire("c2", duration_s=5) is None  # held by c1
    renewed = leases.acquire("c1", duration_s=5, current=first)
    assert renewed is not None and renewed.epoch == first.epoch
    ControllerLease.objects.filter(pk=1).update(expires_at=timezone.now() - timedelta(seconds=1))
    second = leases.acquire("c2", duration_s=5)
    assert second is not None and second.epoch == first.epoch + 1
    # c1 comes back (it was paused): it cannot renew and every write it tries is refused
    assert leases.acquire("c1", duration_s=5, current=renewed) is None
    with pytest.raises(leases.LeaseLost):
        controller.rebalance_preferred_leaders(renewed, [])
    rec = MetadataRecord.objects.filter(kind="controller").last()
    assert rec.value == {"controller_id": "c2", "epoch": second.epoch}
    assert leases.current()["controller_id"] == "c2" and leases.current()["active"]
    assert leases.release(second)
    assert not leases.current()["active"]
    third = leases.acquire("c3", duration_s=5)
    assert third is not None and third.epoch == second.epoch + 1


@pytest.mark.django_db
def test_deposed_controller_writes_nothing(cluster):
    _world, _topic, _ = cluster
    old = take_lease("c1")
    ControllerLease.objects.filter(pk=1).update(expires_at=timezone.now() - timedelta(seconds=1))
    expire(1)
    head = metadata_log.head()[0]
    with pytest.raises(leases.LeaseLost):
        controller.fence_expired_brokers(old)
    assert metadata_log.head()[0] == head
    assert not Broker.objects.get(pk=1).fenced
    new = take_lease("c2")
    assert controller.fence_expired_brokers(new) == [1]


def test_controller_loop_takes_over_and_releases(cluster):
    c1 = controller.Controller("c1", lease_s=5, tick_s=0.05)
    c2 = controller.Controller("c2", lease_s=5, tick_s=0.05)
    c1.renew()
    c2.renew()
    assert c1.lease is not None and c2.lease is None
    expire(2)
    c1.tick()  # fences broker 2
    assert Broker.objects.get(pk=2).fenced
    c1.stop.set()
    c1.run()  # stops at once and releases the lease
    assert c1.lease is None
    c2.renew()
    assert c2.lease is not None and c2.lease.epoch == 2


# --- brokers: epochs, heartbeats, fencing -------------------------------------------------


@pytest.mark.django_db
def test_broker_epochs_grow_and_stale_heartbeats_are_refused(world):
    c = cluster_client()
    r1 = c.post(
        "/internal/v1/brokers/register",
        {"broker_id": 1, "url": "http://127.0.0.1:9091"},
        format="json",
    )
    r2 = c.post(
        "/internal/v1/brokers/register",
        {"broker_id": 1, "url": "http://127.0.0.1:9091"},
        format="json",
    )
    e1, e2 = r1.json()["broker_epoch"], r2.json()["broker_epoch"]
    assert e2 > e1 > 0
    r = c.post("/internal/v1/brokers/heartbeat", {"broker_id": 1, "broker_epoch": e1}, "json")
    assert r.status_code == 409 and r.json()["error_code"] == "STALE_BROKER_EPOCH"
    r = c.post("/internal/v1/brokers/heartbeat", {"broker_id": 1, "broker_epoch": e2}, "json")
    assert r.status_code == 200
    assert r.json() == {"broker_id": 1, "live": True, "fenced": False, "shutting_down": False}


def test_broker_death_fences_it_and_moves_leadership(cluster):
    _world, topic, epochs = cluster
    before = {p: row(topic, p) for p in range(3)}
    victim = before[0].leader
    expire(victim)
    assert controller.fence_expired_brokers(take_lease()) == [victim]
    b = Broker.objects.get(pk=victim)
    assert b.fenced and b.fenced_at_version > 0
    record = latest_topic_record(topic)
    for p in range(3):
        a = row(topic, p)
        assert victim not in a.isr and len(a.isr) == 2
        assert a.partition_epoch > before[p].partition_epoch
        if before[p].leader == victim:
            assert a.leader not in (victim, -1) and a.leader_epoch == before[p].leader_epoch + 1
        else:
            assert a.leader == before[p].leader and a.leader_epoch == before[p].leader_epoch
        assert record["partitions"][p]["leader"] == a.leader
        assert record["partitions"][p]["partition_epoch"] == a.partition_epoch
    assert victim not in selectors.live_broker_ids()
    # the fenced broker heartbeats again: unfenced once it has seen its fencing record
    c = cluster_client()
    body = {"broker_id": victim, "broker_epoch": epochs[victim], "metadata_version": 0}
    r = c.post("/internal/v1/brokers/heartbeat", body, format="json")
    assert r.json()["fenced"] is True
    body["metadata_version"] = metadata_log.head()[0]
    r = c.post("/internal/v1/brokers/heartbeat", body, format="json")
    assert r.json()["fenced"] is False and victim in selectors.live_broker_ids()


def test_last_isr_member_dies_elr_then_unclean_only_when_enabled(cluster):
    _world, topic, _epochs = cluster
    lease = take_lease()
    expire(2, 3)
    controller.fence_expired_brokers(lease)
    expire(1)
    controller.fence_expired_brokers(lease)
    a = row(topic)
    # 2 left while the ISR was still at min ISR; 3 and 1 left below it: they hold every
    # committed record (the HW could not advance), so they are eligible leader replicas
    assert a.leader == -1 and a.isr == [] and sorted(a.elr) == [1, 3]
    register(2)  # back, but neither in the ISR nor the ELR: no clean candidate, it waits
    assert controller.elect_offline_leaders(lease) == 0
    assert row(topic).leader == -1
    # broker 1 (ELR) comes back cleanly: it leads again
    register(1)
    assert controller.elect_offline_leaders(lease) >= 3
    a = row(topic)
    assert a.leader == 1 and a.isr == [1]
    assert not AuditEvent.objects.filter(action="partition.unclean_leader_election").exists()


def test_unclean_election_needs_the_topic_opt_in_and_is_audited(cluster):
    world, topic, _ = cluster
    lease = take_lease()
    expire(2, 3)
    controller.fence_expired_brokers(lease)
    expire(1)
    controller.fence_expired_brokers(lease)
    register(1, clean=False)  # lost its unflushed tail: out of ISR and ELR for good
    a = row(topic)
    assert 1 not in a.isr and 1 not in a.elr and a.leader == -1
    controller.elect_offline_leaders(lease)  # (other tenants' single-replica topics recover)
    assert all(row(topic, p).leader == -1 for p in range(3))  # off by default: it waits
    topic_alter_configs(
        ctx=ctx(world.a), topic=topic, changes={"unclean.leader.election.enable": "true"}
    )
    assert controller.elect_offline_leaders(lease) == 3
    a = row(topic)
    assert a.leader == 1 and a.isr == [1]
    events = AuditEvent.objects.filter(
        action="partition.unclean_leader_election", organisation=world.a.org
    )
    assert events.count() == 3


def test_unclean_config_is_validated(cluster):
    world, topic, _ = cluster
    with pytest.raises(InvalidConfig):
        topic_alter_configs(
            ctx=ctx(world.a), topic=topic, changes={"unclean.leader.election.enable": "maybe"}
        )
    r = key_client(world.a.token(roles.ADMIN)).get("/api/v1/topics/replicated")
    assert r.json()["effective_configs"]["unclean.leader.election.enable"] == "false"


# --- AlterPartition ----------------------------------------------------------------------------


def alter(topic, epochs, **over):
    a = row(topic)
    isr = over.pop("isr", [b for b in a.isr if b != a.isr[-1]])
    body = {
        "broker_id": a.leader,
        "broker_epoch": epochs[a.leader],
        "topic_id": str(topic.topic_id),
        "partition": 0,
        "leader_epoch": a.leader_epoch,
        "partition_epoch": a.partition_epoch,
        "new_isr": [{"broker_id": b, "broker_epoch": epochs[b]} for b in isr],
    }
    body.update(over)
    return cluster_client().post("/internal/v1/partitions/alter", body, format="json")


def test_alter_partition_shrinks_and_expands_the_isr(cluster):
    _world, topic, epochs = cluster
    a = row(topic)
    head = metadata_log.head()[0]
    r = alter(topic, epochs)
    assert r.status_code == 200 and r.json()["error_code"] == "NONE", r.json()
    assert r.json()["partition_epoch"] == a.partition_epoch + 1 and len(r.json()["isr"]) == 2
    assert metadata_log.head()[0] > head  # the record is in the log before the answer
    assert latest_topic_record(topic)["partitions"][0]["isr"] == r.json()["isr"]
    r = alter(topic, epochs, isr=list(a.replicas))
    assert r.json()["error_code"] == "NONE" and sorted(r.json()["isr"]) == [1, 2, 3]


def test_alter_partition_keeps_a_member_below_the_hw_out_of_the_elr(cluster):
    """A leader dropping a member it saw fetch below the HW says so; under min ISR the
    member does not become an eligible leader replica (it misses committed records)."""
    _world, topic, epochs = cluster
    a = row(topic)
    follower = next(b for b in a.isr if b != a.leader)
    last = next(b for b in a.isr if b not in (a.leader, follower))
    assert alter(topic, epochs, isr=[a.leader, follower]).json()["error_code"] == "NONE"
    r = alter(topic, epochs, isr=[a.leader], below_high_watermark=[follower])
    assert r.json()["error_code"] == "NONE", r.json()
    assert r.json()["isr"] == [a.leader] and follower not in r.json()["elr"]
    assert follower not in row(topic).elr
    r = alter(topic, epochs, isr=[a.leader], below_high_watermark=["x"])
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"
    assert last not in row(topic).isr


def test_alter_partition_errors(cluster):
    _world, topic, epochs = cluster
    a = row(topic)
    follower = next(b for b in a.replicas if b != a.leader)
    cases = {
        "FENCED_LEADER_EPOCH": {"leader_epoch": a.leader_epoch + 1},
        "INVALID_UPDATE_VERSION": {"partition_epoch": a.partition_epoch + 5},
        "NOT_LEADER_OR_FOLLOWER": {"broker_id": follower, "broker_epoch": epochs[follower]},
        "INVALID_REQUEST": {"isr": [follower]},  # without the leader
    }
    for code, over in cases.items():
        r = alter(topic, epochs, **over)
        assert r.status_code == 200 and r.json()["error_code"] == code, (code, r.json())
        assert r.json()["partition_epoch"] == a.partition_epoch  # nothing changed
    # a member with an old broker epoch, or a fenced one, may not join
    alter(topic, epochs, isr=[a.leader])
    stale = dict(epochs)
    stale[follower] = epochs[follower] - 1
    r = alter(topic, stale, isr=[a.leader, follower])
    assert r.json()["error_code"] == "INELIGIBLE_REPLICA"
    expire(follower)
    controller.fence_expired_brokers(take_lease())
    r = alter(topic, epochs, isr=[row(topic).leader, follower])
    assert r.json()["error_code"] == "INELIGIBLE_REPLICA"
    # the leader's own registration must be current; unknown partitions are 404
    r = alter(topic, {**epochs, a.leader: epochs[a.leader] - 1})
    assert r.status_code == 409 and r.json()["error_code"] == "STALE_BROKER_EPOCH"
    r = alter(topic, epochs, partition=99)
    assert r.status_code == 404 and r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"


# --- controlled shutdown, preferred leaders, reassignment ----------------------------------


def test_controlled_shutdown_moves_leadership_first(cluster):
    _world, topic, epochs = cluster
    c = cluster_client()
    leader = row(topic).leader
    body = {"broker_id": leader, "broker_epoch": epochs[leader]}
    r = c.post("/internal/v1/brokers/controlled-shutdown", body, format="json")
    assert r.status_code == 200 and r.json()["partitions_led"] == 0
    for p in range(3):
        a = row(topic, p)
        assert a.leader != leader and leader not in a.isr
    r = c.post(
        "/internal/v1/brokers/heartbeat",
        {"broker_id": leader, "broker_epoch": epochs[leader]},
        format="json",
    )
    assert r.json()["shutting_down"] is True
    r = c.post(
        "/internal/v1/brokers/controlled-shutdown",
        {"broker_id": leader, "broker_epoch": epochs[leader] - 1},
        format="json",
    )
    assert r.status_code == 409 and r.json()["error_code"] == "STALE_BROKER_EPOCH"


def test_controlled_shutdown_of_the_last_isr_member_keeps_leading(cluster):
    _world, topic, epochs = cluster
    leader = row(topic).leader
    alter(topic, epochs, isr=[leader])  # partition 0: the leader alone is in sync
    led = partition_services.broker_controlled_shutdown(
        broker_id=leader, broker_epoch=epochs[leader]
    )
    # partition 0 waits (a live follower may catch up and take over); the others moved
    assert led == 1 and row(topic).leader == leader
    assert all(row(topic, p).leader != leader for p in (1, 2))
    # once no other replica can ever take over, waiting is pointless: 0, though it leads
    expire(*[b for b in (1, 2, 3) if b != leader])
    controller.fence_expired_brokers(take_lease())
    led = partition_services.broker_controlled_shutdown(
        broker_id=leader, broker_epoch=epochs[leader]
    )
    assert led == 0 and row(topic).leader == leader


def test_preferred_leader_election_and_automatic_rebalance(cluster):
    _world, topic, epochs = cluster
    lease = take_lease()
    preferred = row(topic).replicas[0]
    expire(preferred)
    controller.fence_expired_brokers(lease)
    assert row(topic).leader != preferred
    register(preferred)  # back, but not in the ISR yet: nothing to do
    assert partition_services.preferred_leader_election() == []
    a = row(topic)
    alter(topic, epochs | {preferred: Broker.objects.get(pk=preferred).epoch}, isr=a.replicas)
    assert controller.preferred_imbalance()  # the plan exists ...
    loop = controller.Controller("c1", lease_s=5, imbalance_s=0)
    loop.lease = lease
    loop.tick()  # ... first seen
    loop.tick()  # ... lasted imbalance_s: moved
    assert row(topic).leader == preferred
    assert controller.preferred_imbalance() == []


def test_operator_preferred_election_endpoint(cluster):
    _world, topic, epochs = cluster
    lease = take_lease()
    preferred = row(topic).replicas[0]
    expire(preferred)
    controller.fence_expired_brokers(lease)
    new_epochs = epochs | register(preferred)
    alter(topic, new_epochs, isr=row(topic).replicas)
    r = cluster_client().post(
        "/internal/v1/partitions/preferred-election",
        {"topic_id": str(topic.topic_id), "partition": 0},
        format="json",
    )
    assert r.status_code == 200 and r.json()["elected"][0]["leader"] == preferred
    assert row(topic).leader == preferred


def test_reassignment_lifecycle(cluster):
    _world, topic, epochs = cluster
    epochs |= register(4)
    c = cluster_client()
    a = row(topic)
    target = [b for b in a.replicas if b != a.leader] + [4]  # move off the leader, onto 4
    body = {"topic_id": str(topic.topic_id), "partition": 0, "replicas": target}
    r = c.post("/internal/v1/partitions/reassignment", body, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["adding_replicas"] == [4] and r.json()["removing_replicas"] == [a.leader]
    assert not r.json()["under_replicated"]  # a replica still being added does not count
    assert controller.complete_reassignments(take_lease()) == 0  # 4 is not in the ISR yet
    # the leader reports 4 caught up: the move completes, leadership leaves the old leader
    r = alter(topic, epochs, isr=[*row(topic).isr, 4])
    assert r.json()["error_code"] == "NONE", r.json()
    done = row(topic)
    assert done.replicas == target and sorted(done.isr) == sorted(target)
    assert done.leader in target and done.adding_replicas == [] == done.removing_replicas
    # cancel: back to the original replicas; twice is harmless
    body["replicas"] = [1, 2, 3]
    c.post("/internal/v1/partitions/reassignment", body, format="json")
    assert row(topic).adding_replicas
    cancel = {"topic_id": str(topic.topic_id), "partition": 0}
    r = c.delete("/internal/v1/partitions/reassignment", cancel, format="json")
    # the original replicas come back (the core keeps their set, not their order)
    assert r.json()["cancelled"] is True and sorted(row(topic).replicas) == sorted(target)
    r = c.delete("/internal/v1/partitions/reassignment", cancel, format="json")
    assert r.status_code == 200 and r.json()["cancelled"] is False
    body["replicas"] = [1, 99]
    r = c.post("/internal/v1/partitions/reassignment", body, format="json")
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REPLICA_ASSIGNMENT"


def test_unclean_restart_leaves_isr(cluster):
    _world, topic, _ = cluster
    a = row(topic)
    follower = next(b for b in a.replicas if b != a.leader)
    register(follower, clean=False)
    for p in range(3):
        assert follower not in row(topic, p).isr
    register(a.leader, clean=False)  # the leader itself: the partition waits for an election
    assert row(topic).leader == -1
    assert controller.elect_offline_leaders(take_lease()) >= 1
    assert row(topic).leader not in (-1, a.leader, follower)


def test_partition_increase_keeps_the_topics_replication_factor(cluster):
    world, topic, _ = cluster
    topic_add_partitions(ctx=ctx(world.a), topic=topic, partitions=6)
    lists = [row(topic, p).replicas for p in range(6)]
    assert all(len(r) == 3 and len(set(r)) == 3 for r in lists)
    assert sorted(r[0] for r in lists) == [1, 1, 2, 2, 3, 3]  # leaders stay balanced


# --- health views -------------------------------------------------------------------------------


def test_partition_health_for_operators_and_tenants(cluster):
    world, topic, _ = cluster
    expire(1)
    controller.fence_expired_brokers(take_lease())
    r = cluster_client().get("/internal/v1/partitions?state=under_replicated")
    mine = [p for p in r.json()["partitions"] if p["topic_id"] == str(topic.topic_id)]
    assert len(mine) == 3 and all(1 not in p["isr"] for p in mine)
    r = cluster_client().get("/internal/v1/controller")
    assert r.json()["controller"]["controller_id"] == "c1"
    assert {b["broker_id"]: b["fenced"] for b in r.json()["brokers"]}[1] is True

    a_client = key_client(world.a.token(roles.READ_ONLY))
    r = a_client.get("/api/v1/cluster/partitions?state=under_replicated")
    assert r.status_code == 200
    assert {(p["topic"], p["partition"]) for p in r.json()["partitions"]} == {
        ("replicated", 0),
        ("replicated", 1),
        ("replicated", 2),
    }
    # A's other topic (RF 1) lived on broker 1 alone: offline, not under-replicated
    offline = a_client.get("/api/v1/cluster/partitions?state=offline").json()["partitions"]
    assert {p["topic"] for p in offline} == {world.a.topic.name}
    assert all(p["leader"] == -1 and p["offline"] for p in offline)
    r = a_client.get("/api/v1/cluster/partitions?state=nope")
    assert r.status_code == 400
    details = a_client.get("/api/v1/topics/replicated").json()["partition_details"]
    assert [d["partition"] for d in details] == [0, 1, 2]
    assert all(d["under_replicated"] and not d["offline"] and d["leader"] != 1 for d in details)
    # tenant B sees none of A's partitions
    b_client = key_client(world.b.token(roles.READ_ONLY))
    names = {p["topic"] for p in b_client.get("/api/v1/cluster/partitions").json()["partitions"]}
    assert "replicated" not in names


def test_unclean_restart_of_the_only_replica_keeps_it_leading(world):
    register(1)
    topic = topic_create(ctx=ctx(world.a), name="single", partitions=1, replication_factor=1)
    before = row(topic)
    assert before.replicas == [1]
    register(1, clean=False)  # no other copy exists: it stays leader and in sync
    after = row(topic)
    assert after.leader == 1 and after.isr == [1] and after.leader_epoch == before.leader_epoch
