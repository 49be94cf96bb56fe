"""Unclean recovery on the Django test database: every broker killed and restarted
uncleanly, the brokers report their logs in heartbeats, and the controller elects the
longest log among the last known ELR, audited; reports from an older registration and
malformed reports do not count."""

from __future__ import annotations

import pytest

from backend.audit.models import AuditEvent
from backend.cluster import controller
from backend.cluster.models import ReplicaLogReport

from .test_controller import cluster, cluster_client, expire, register, row, take_lease

__all__ = ["cluster"]  # the fixture, shared with test_controller


def heartbeat(broker: int, epoch: int, logs: list[dict]):
    body = {"broker_id": broker, "broker_epoch": epoch, "replica_logs": logs}
    return cluster_client().post("/internal/v1/brokers/heartbeat", body, format="json")


def report(topic, partition: int, epoch: int, leo: int) -> dict:
    return {
        "topic_id": str(topic.topic_id),
        "partition": partition,
        "last_leader_epoch": epoch,
        "log_end_offset": leo,
    }


def leaders_after_a_tick(lease, topic) -> list[int]:
    """The controller elects (other tenants' partitions too); this topic's leaders."""
    controller.elect_offline_leaders(lease)
    return [row(topic, p).leader for p in range(3)]


def crash_everything(topic):
    """kill -9 of brokers 1-3: fenced one after the other, then registered uncleanly; (the
    brokers' new epochs, the controller's lease)."""
    lease = take_lease()
    for b in (1, 2, 3):
        expire(b)
        controller.fence_expired_brokers(lease)
    epochs = register(1, 2, 3, clean=False)
    for p in range(3):
        a = row(topic, p)
        assert a.leader == -1 and a.isr == [] and a.elr == [] and a.last_known_elr
    return epochs, lease


def test_whole_cluster_crash_recovers_the_longest_log_once_every_replica_reported(cluster):
    world, topic, _ = cluster
    epochs, lease = crash_everything(topic)
    # 1 was fenced first, with the ISR still at min ISR: 2 and 3 hold every committed record
    assert sorted(row(topic).last_known_elr) == [2, 3]
    assert leaders_after_a_tick(lease, topic) == [-1] * 3  # no reports yet: it waits
    assert heartbeat(2, epochs[2], [report(topic, p, 7, 50) for p in range(3)]).status_code == 200
    assert leaders_after_a_tick(lease, topic) == [-1] * 3  # 3 has not reported: it waits
    # 1 reports a longer log, but it is not a candidate; 3 has the longest of 2 and 3
    assert heartbeat(1, epochs[1], [report(topic, 0, 9, 900)]).status_code == 200
    assert heartbeat(3, epochs[3], [report(topic, p, 7, 60) for p in range(3)]).status_code == 200
    assert leaders_after_a_tick(lease, topic) == [3] * 3
    for p in range(3):
        a = row(topic, p)
        assert a.leader == 3 and a.isr == [3] and a.elr == [] and a.last_known_elr == []
    events = AuditEvent.objects.filter(
        action="partition.unclean_recovery", organisation=world.a.org
    )
    assert events.count() == 3
    after = events.first().after
    assert after["leader"] == 3 and after["replica_logs"]["3"]["log_end_offset"] == 60
    assert not AuditEvent.objects.filter(action="partition.unclean_leader_election").exists()
    # the reports were for the offline period: gone once the partitions lead again
    assert not ReplicaLogReport.objects.filter(assignment__topic=topic).exists()


def test_reports_from_an_older_registration_do_not_count(cluster):
    _world, topic, _ = cluster
    epochs, lease = crash_everything(topic)
    for b in (2, 3):
        assert heartbeat(b, epochs[b], [report(topic, 0, 7, 10 * b)]).status_code == 200
    # 3 restarts again before the controller's tick: its report is void
    new3 = register(3, clean=False)[3]
    assert not ReplicaLogReport.objects.filter(broker_id=3).exists()
    assert leaders_after_a_tick(lease, topic)[0] == -1
    # a heartbeat with the old epoch is refused and stores nothing
    assert heartbeat(3, epochs[3], [report(topic, 0, 7, 30)]).status_code == 409
    assert leaders_after_a_tick(lease, topic)[0] == -1
    assert heartbeat(3, new3, [report(topic, 0, 7, 5)]).status_code == 200
    assert leaders_after_a_tick(lease, topic) == [2, -1, -1]  # 2's log (20) is the longer


@pytest.mark.parametrize(
    "bad",
    [
        {"topic_id": "nope", "partition": 0, "last_leader_epoch": 1, "log_end_offset": 1},
        {"partition": 0, "last_leader_epoch": 1, "log_end_offset": 1},
        {"topic_id": None, "partition": -1, "last_leader_epoch": 1, "log_end_offset": 1},
        {"topic_id": None, "partition": 0, "last_leader_epoch": -2, "log_end_offset": 1},
        {"topic_id": None, "partition": 0, "last_leader_epoch": 1, "log_end_offset": -1},
        {"topic_id": None, "partition": 0, "last_leader_epoch": 1, "log_end_offset": 1, "x": 1},
    ],
)
def test_a_malformed_report_is_refused_with_a_stable_code(cluster, bad):
    _world, topic, epochs = cluster
    if bad.get("topic_id", "") is None:
        bad = {**bad, "topic_id": str(topic.topic_id)}
    r = heartbeat(1, epochs[1], [bad])
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST", r.json()
    assert not ReplicaLogReport.objects.exists()


def test_a_report_for_a_partition_the_broker_does_not_replicate_is_ignored(cluster):
    _world, topic, epochs = cluster
    unknown = {**report(topic, 0, 1, 1), "topic_id": "00000000-0000-0000-0000-000000000000"}
    assert heartbeat(1, epochs[1], [unknown, report(topic, 99, 1, 1)]).status_code == 200
    assert not ReplicaLogReport.objects.exists()


def test_operators_see_why_a_partition_is_offline(cluster):
    _world, topic, _ = cluster
    epochs, _lease = crash_everything(topic)
    assert heartbeat(2, epochs[2], [report(topic, 0, 7, 50)]).status_code == 200
    r = cluster_client().get("/internal/v1/partitions?state=offline")
    assert r.status_code == 200
    mine = {p["partition"]: p for p in r.json()["partitions"] if p["topic"] == topic.name}
    assert sorted(mine) == [0, 1, 2]
    assert "waits for brokers 3 to be back" in mine[0]["offline_reason"]
    both = ", ".join(str(b) for b in row(topic, 1).last_known_elr)  # in replica order
    assert f"waits for brokers {both} to be back" in mine[1]["offline_reason"]
    assert sorted(mine[0]["last_known_elr"]) == [2, 3]
