"""Partition-state writes that answer a request: AlterPartition from a leader, controlled
shutdown from a broker, and the operator's preferred election and reassignments.

Each runs in one transaction that takes the metadata lock first (so it is serialised with
the controller loop and every other metadata writer), locks the partition rows it reads,
asks the pure core (``brokernodes.replication.controller``) and, on a change, saves the
rows and appends the topic records before answering. They need no controller lease: the
request carries its own fencing (leader, partition and broker epochs), and the lock makes
every decision on the current state. The periodic decisions (fencing, elections,
automatic rebalance, reassignment progress) are the lease holder's (``controller``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from backend.cluster import metadata_log, partitions
from backend.cluster.errors import (
    InvalidReplicaAssignment,
    StaleBrokerEpoch,
    UnknownBroker,
    UnknownTopicOrPartition,
)
from backend.cluster.models import Broker, PartitionAssignment
from backend.cluster.services import commit_partition_changes
from brokernodes.replication import controller as core
from brokernodes.replication.controller import PartitionRegistration
from brokernodes.replication.leader import AlterPartitionRequest

logger = logging.getLogger(__name__)


def _locked_assignment(topic_id, partition: int) -> PartitionAssignment:
    a = (
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .filter(topic__topic_id=topic_id, partition=partition)
        .first()
    )
    if a is None:
        raise UnknownTopicOrPartition(f"no partition {partition} of topic {topic_id}")
    return a


def _current_broker(broker_id: int, broker_epoch: int) -> Broker:
    broker = Broker.objects.filter(broker_id=broker_id).first()
    if broker is None:
        raise UnknownBroker(f"unknown broker {broker_id}: register first")
    if broker_epoch != broker.epoch:
        raise StaleBrokerEpoch(
            f"broker {broker_id} spoke with epoch {broker_epoch}, but its current "
            f"registration has epoch {broker.epoch}: register again"
        )
    return broker


@dataclass(frozen=True)
class AlterPartitionOutcome:
    error_code: str
    registration: PartitionRegistration


@transaction.atomic
def alter_partition(
    *,
    broker_id: int,
    broker_epoch: int,
    topic_id,
    partition: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: list[tuple[int, int]],
    below_high_watermark: list[int] | None = None,
) -> AlterPartitionOutcome:
    """A leader's ISR change (KRaft's AlterPartition), decided by ``core.alter_partition``;
    on success the new topic record is in the metadata log when this returns."""
    metadata_log.lock()
    _current_broker(broker_id, broker_epoch)
    a = _locked_assignment(topic_id, partition)
    reg = partitions.registration(a)
    request = AlterPartitionRequest(
        leader_id=broker_id,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        new_isr=tuple((int(b), int(e)) for b, e in new_isr),
        below_high_watermark=tuple(int(b) for b in below_high_watermark or ()),
    )
    result = core.alter_partition(
        reg, request, partitions.broker_view(), min_isr=partitions.min_isr(a.topic)
    )
    if result.error == "NONE" and result.registration != reg:
        commit_partition_changes({a: result.registration})
    return AlterPartitionOutcome(result.error, result.registration)


@transaction.atomic
def broker_controlled_shutdown(*, broker_id: int, broker_epoch: int) -> int:
    """Mark the broker shutting down and move its leaderships away (``core.controlled_
    shutdown``); returns how many partitions it still leads that waiting may yet move: led
    ones with another live replica not shutting down (one catching up may join the ISR and
    take over). A partition whose other replicas are all fenced or shutting down too is not
    counted: waiting cannot help it (several brokers stopping at once would otherwise wait
    for each other). The broker repeats the call until the answer is 0, then stops."""
    metadata_log.lock()
    broker = _current_broker(broker_id, broker_epoch)
    if not broker.shutting_down:
        broker.shutting_down = True
        broker.save(update_fields=["shutting_down"])
    view = partitions.broker_view()
    rows = {
        a.pk: a
        for a in PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .order_by("pk")
        if broker_id in a.replicas
    }
    changes: dict[PartitionAssignment, PartitionRegistration] = {}
    by_min_isr: dict[int, dict[int, PartitionRegistration]] = {}
    for a in rows.values():
        by_min_isr.setdefault(partitions.min_isr(a.topic), {})[a.pk] = partitions.registration(a)
    for min_isr, regs in by_min_isr.items():
        plan = core.controlled_shutdown(regs, broker_id, view, min_isr=min_isr)
        for pk, reg in plan.changes.items():
            changes[rows[pk]] = reg
    commit_partition_changes(changes)
    view = partitions.broker_view()
    led = sum(
        1
        for a in rows.values()
        if a.leader == broker_id and any(view.eligible(r) for r in a.replicas if r != broker_id)
    )
    logger.info("controlled shutdown of broker %s: %d partitions still led", broker_id, led)
    return led


@transaction.atomic
def preferred_leader_election(*, topic_id=None, partition: int | None = None) -> list[dict]:
    """Give partitions back to their preferred replicas where it is in the ISR and may
    lead (an operator's trigger; the controller also does it after a lasting imbalance).
    Returns the partitions moved."""
    metadata_log.lock()
    qs = (
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .order_by("pk")
    )
    if topic_id is not None:
        qs = qs.filter(topic__topic_id=topic_id)
        if partition is not None:
            qs = qs.filter(partition=partition)
    view = partitions.broker_view()
    changes = {}
    for a in qs:
        new = core.preferred_leader_election(partitions.registration(a), view)
        if new is not None:
            changes[a] = new
    commit_partition_changes(changes)
    return [
        {"topic_id": str(a.topic.topic_id), "partition": a.partition, "leader": a.leader}
        for a in changes
    ]


@transaction.atomic
def reassignment_start(*, topic_id, partition: int, replicas: list[int]) -> PartitionAssignment:
    """Begin moving a partition to ``replicas`` (KIP-455): the new ones join as followers
    and the move completes when they are all in the ISR (the leader's AlterPartition, or
    the controller)."""
    metadata_log.lock()
    a = _locked_assignment(topic_id, partition)
    known = set(Broker.objects.values_list("broker_id", flat=True))
    unknown = [r for r in replicas if r not in known]
    if unknown:
        raise InvalidReplicaAssignment(
            f"brokers {unknown} are not registered", {"replicas": ["unknown broker ids"]}
        )
    try:
        new = core.start_reassignment(partitions.registration(a), replicas)
    except ValueError as e:
        raise InvalidReplicaAssignment(str(e), {"replicas": [str(e)]}) from None
    done = core.maybe_complete_reassignment(new, partitions.broker_view())
    commit_partition_changes({a: done if done is not None else new})
    return a


@transaction.atomic
def reassignment_cancel(*, topic_id, partition: int) -> tuple[PartitionAssignment, bool]:
    """Revert an unfinished reassignment to the original replicas; (row, whether one was
    in progress): cancelling twice is harmless, as a DELETE should be."""
    metadata_log.lock()
    a = _locked_assignment(topic_id, partition)
    new = core.cancel_reassignment(partitions.registration(a))
    if new is None:
        return a, False
    commit_partition_changes({a: new})
    return a, True
