"""The active controller's periodic decisions, and the loop that runs them under the lease.

Each decision is one transaction that first checks the lease (``lease.check``: a deposed
controller writes nothing), then takes the metadata lock, reads the rows it changes with
``SELECT ... FOR UPDATE``, asks the pure core (``brokernodes.replication.controller``) and
commits the new registrations with their metadata records. Work per tick is bounded
(``MAX_*``): a large backlog is worked off over several ticks.

- ``fence_expired_brokers``: brokers whose last heartbeat is older than
  ``SLUICE_BROKER_SESSION_TIMEOUT_S`` are fenced; they leave every ISR (into the ELR when the
  ISR falls below ``min.insync.replicas``) and their partitions get new leaders.
- ``elect_offline_leaders``: partitions without a leader get one once a replica may lead:
  ISR, then ELR, then unclean recovery (KIP-966's balanced strategy: when every ISR/ELR
  member restarted uncleanly, the longest log among them once all are back and reported
  it), then (only with ``unclean.leader.election.enable=true``) any live replica. Recoveries
  and unclean elections are audited and logged.
- ``complete_reassignments``: reassignments whose target replicas are all in the ISR finish.
- ``rebalance_preferred_leaders``: partitions go back to their preferred leaders; the loop
  calls it once an imbalance has lasted ``SLUICE_LEADER_IMBALANCE_CHECK_S``.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction

from backend.cluster import lease as leases
from backend.cluster import metadata_log, partitions
from backend.cluster.models import Broker, PartitionAssignment, ReplicaLogReport
from backend.cluster.services import BROKER, broker_record, commit_partition_changes
from brokernodes.replication import controller as core
from brokernodes.replication.controller import Election, PartitionRegistration, ReplicaLog

logger = logging.getLogger(__name__)

MAX_FENCES_PER_TICK = 16
MAX_PARTITIONS_PER_TICK = 1000


def _audit_election(a: PartitionAssignment, election: Election, action: str, **extra) -> None:
    """An audit event for an election that may have cost acknowledged records."""
    from backend.audit.services import audit_record
    from backend.core.context import RequestContext

    topic = a.topic
    audit_record(
        ctx=RequestContext.system(topic.organisation),
        action=action,
        object_type="topic",
        object_id=topic.topic_id,
        after={
            "topic": topic.name,
            "partition": a.partition,
            "leader": election.leader,
            "leader_epoch": election.registration.leader_epoch,
            **extra,
        },
    )


def _audit_unclean(a: PartitionAssignment, election: Election) -> None:
    logger.warning(
        "UNCLEAN leader election: topic %s partition %s now led by broker %s (epoch %s); "
        "acknowledged records may be lost",
        a.topic.topic_id,
        a.partition,
        election.leader,
        election.registration.leader_epoch,
    )
    _audit_election(
        a,
        election,
        "partition.unclean_leader_election",
        isr=list(election.registration.isr),
    )


def _audit_recovery(a: PartitionAssignment, election: Election, logs: dict[int, ReplicaLog]):
    chosen = logs[election.leader]
    logger.warning(
        "unclean recovery: topic %s partition %s had every eligible replica (%s) restart "
        "uncleanly; broker %s has the longest log (last leader epoch %s, log end %s) and "
        "leads with epoch %s; records beyond it that no replica kept are lost",
        a.topic.topic_id,
        a.partition,
        sorted(logs),
        election.leader,
        chosen.last_leader_epoch,
        chosen.log_end_offset,
        election.registration.leader_epoch,
    )
    _audit_election(
        a,
        election,
        "partition.unclean_recovery",
        replica_logs={
            str(b): {"last_leader_epoch": r.last_leader_epoch, "log_end_offset": r.log_end_offset}
            for b, r in sorted(logs.items())
        },
    )


# per assignment id, why it was offline when last logged: logged again only on a change
_still_offline: dict[int, str] = {}


def _log_still_offline(a: PartitionAssignment, view, logs: dict[int, ReplicaLog]) -> None:
    reason = core.offline_reason(
        partitions.registration(a), view, logs, unclean_enabled=partitions.unclean_enabled(a.topic)
    )
    if _still_offline.get(a.pk) != reason:
        _still_offline[a.pk] = reason
        logger.warning(
            "topic %s partition %s is offline: %s", a.topic.topic_id, a.partition, reason
        )


def _locked_partitions() -> list[PartitionAssignment]:
    return list(
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .order_by("pk")
    )


def fence_expired_brokers(lease: leases.Lease) -> list[int]:
    """Fence brokers whose session expired and re-elect their partitions; their ids."""
    expired = Broker.objects.filter(
        fenced=False, last_heartbeat_at__lt=partitions.session_horizon()
    )
    return _fence_expired_brokers(lease) if expired.exists() else []


@transaction.atomic
def _fence_expired_brokers(lease: leases.Lease) -> list[int]:
    leases.check(lease)
    metadata_log.lock()
    expired = list(
        Broker.objects.select_for_update()
        .filter(fenced=False, last_heartbeat_at__lt=partitions.session_horizon())
        .order_by("broker_id")[:MAX_FENCES_PER_TICK]
    )
    if not expired:
        return []
    regs: dict[PartitionAssignment, PartitionRegistration] = {}
    rows = _locked_partitions()
    unclean: dict[PartitionAssignment, Election] = {}
    for broker in expired:
        broker.fenced = True
        broker.save(update_fields=["fenced"])
        broker.fenced_at_version = metadata_log.append(
            BROKER, str(broker.broker_id), broker_record(broker)
        )
        broker.save(update_fields=["fenced_at_version"])
        view = partitions.broker_view()
        for a in rows:
            reg = regs.get(a) or partitions.registration(a)
            election = core.fence_broker(
                reg,
                broker.broker_id,
                view,
                min_isr=partitions.min_isr(a.topic),
                unclean_enabled=partitions.unclean_enabled(a.topic),
            )
            if election is not None and election.registration != reg:
                regs[a] = election.registration
                if election.unclean:
                    unclean[a] = election
        logger.warning(
            "fenced broker %s (no heartbeat for %s s)",
            broker.broker_id,
            settings.SLUICE_BROKER_SESSION_TIMEOUT_S,
        )
    commit_partition_changes(regs)
    for a, election in unclean.items():
        _audit_unclean(a, election)
    return [b.broker_id for b in expired]


def elect_offline_leaders(lease: leases.Lease) -> int:
    """Leaderless partitions get a leader where one may lead; how many did."""
    view = partitions.broker_view()
    candidates = [
        a.pk
        for a in PartitionAssignment.objects.filter(leader__lt=0).only("replicas")
        if any(view.eligible(r) for r in a.replicas)
    ]
    return _elect_offline_leaders(lease, candidates) if candidates else 0


@transaction.atomic
def _elect_offline_leaders(lease: leases.Lease, pks: list[int]) -> int:
    leases.check(lease)
    metadata_log.lock()
    view = partitions.broker_view()
    changes: dict[PartitionAssignment, PartitionRegistration] = {}
    unclean: dict[PartitionAssignment, Election] = {}
    offline = (
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .filter(leader__lt=0, pk__in=pks[:MAX_PARTITIONS_PER_TICK])
        .order_by("pk")
    )
    offline = list(offline)
    logs = partitions.replica_logs([a.pk for a in offline], view)
    recovered: dict[PartitionAssignment, Election] = {}
    for a in offline:
        if not a.replicas:
            continue  # never placed: assign_unplaced_partitions' job
        election = core.elect_offline(
            partitions.registration(a),
            view,
            logs=logs.get(a.pk, {}),
            unclean_enabled=partitions.unclean_enabled(a.topic),
        )
        if election is not None:
            changes[a] = election.registration
            _still_offline.pop(a.pk, None)
            if election.unclean:
                unclean[a] = election
            if election.recovered:
                recovered[a] = election
        else:
            _log_still_offline(a, view, logs.get(a.pk, {}))
    commit_partition_changes(changes)
    ReplicaLogReport.objects.filter(assignment__in=list(changes)).delete()
    for a, election in unclean.items():
        _audit_unclean(a, election)
    for a, election in recovered.items():
        _audit_recovery(a, election, logs[a.pk])
    return len(changes)


def complete_reassignments(lease: leases.Lease) -> int:
    """Finish reassignments whose target replicas all joined the ISR."""
    pks = [
        a.pk
        for a in PartitionAssignment.objects.only("adding_replicas", "removing_replicas")
        if a.adding_replicas or a.removing_replicas
    ]
    return _complete_reassignments(lease, pks) if pks else 0


@transaction.atomic
def _complete_reassignments(lease: leases.Lease, pks: list[int]) -> int:
    leases.check(lease)
    metadata_log.lock()
    view = partitions.broker_view()
    changes = {}
    for a in (
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .filter(pk__in=pks[:MAX_PARTITIONS_PER_TICK])
        .order_by("pk")
    ):
        if a.adding_replicas or a.removing_replicas:
            done = core.maybe_complete_reassignment(partitions.registration(a), view)
            if done is not None:
                changes[a] = done
    return commit_partition_changes(changes)


def preferred_imbalance() -> list[int]:
    """Assignment ids whose preferred leader should lead again (read only, no lock)."""
    regs = {a.pk: partitions.registration(a) for a in PartitionAssignment.objects.all()}
    return list(core.plan_preferred_rebalance(regs, partitions.broker_view()))


@transaction.atomic
def rebalance_preferred_leaders(lease: leases.Lease, pks: list[int]) -> int:
    """Move the given partitions back to their preferred leaders where still possible."""
    leases.check(lease)
    metadata_log.lock()
    view = partitions.broker_view()
    changes = {}
    for a in (
        PartitionAssignment.objects.select_for_update(of=("self",))
        .select_related("topic")
        .filter(pk__in=pks[:MAX_PARTITIONS_PER_TICK])
    ):
        new = core.preferred_leader_election(partitions.registration(a), view)
        if new is not None:
            changes[a] = new
    return commit_partition_changes(changes)


class Controller:
    """The loop of ``manage.py run_controller``: hold (or wait for) the lease, renewing it
    every ``renew_s``, and while active run the decisions every ``tick_s``."""

    def __init__(
        self,
        controller_id: str,
        *,
        lease_s: float | None = None,
        tick_s: float | None = None,
        imbalance_s: float | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.lease_s = float(lease_s or settings.SLUICE_CONTROLLER_LEASE_S)
        self.renew_s = min(1.0, self.lease_s / 4)
        self.tick_s = float(tick_s or settings.SLUICE_CONTROLLER_TICK_S)
        self.imbalance_s = float(
            settings.SLUICE_LEADER_IMBALANCE_CHECK_S if imbalance_s is None else imbalance_s
        )
        self.lease: leases.Lease | None = None
        self.imbalanced_since: float | None = None
        self.stop = threading.Event()

    def renew(self) -> None:
        was = self.lease
        self.lease = leases.acquire(self.controller_id, duration_s=self.lease_s, current=was)
        if self.lease is not None and (was is None or was.epoch != self.lease.epoch):
            logger.info(
                "controller %s is active with controller epoch %s",
                self.controller_id,
                self.lease.epoch,
            )
        elif self.lease is None and was is not None:
            logger.warning("controller %s lost the lease (epoch %s)", self.controller_id, was.epoch)

    def tick(self) -> None:
        assert self.lease is not None
        fence_expired_brokers(self.lease)
        elect_offline_leaders(self.lease)
        complete_reassignments(self.lease)
        if not settings.SLUICE_AUTO_LEADER_REBALANCE:
            return
        plan = preferred_imbalance()
        now = time.monotonic()
        if not plan:
            self.imbalanced_since = None
        elif self.imbalanced_since is None:
            self.imbalanced_since = now
        elif now - self.imbalanced_since >= self.imbalance_s:
            moved = rebalance_preferred_leaders(self.lease, plan)
            logger.info("preferred-leader rebalance moved %d partitions", moved)
            self.imbalanced_since = None

    def run(self) -> None:
        next_renew = 0.0
        while not self.stop.is_set():
            close_old_connections()
            started = time.monotonic()
            try:
                if started >= next_renew:
                    self.renew()
                    next_renew = time.monotonic() + self.renew_s
                if self.lease is not None:
                    self.tick()
                took = time.monotonic() - started
                if took > self.lease_s / 2:
                    logger.warning(
                        "controller %s: one loop took %.1f s (lease %.1f s): a slow database "
                        "or an overloaded machine; the lease may lapse",
                        self.controller_id,
                        took,
                        self.lease_s,
                    )
            except leases.LeaseLost as e:
                logger.warning("%s", e)
                self.lease = None
            except DatabaseError as e:
                logger.error("controller %s: database error: %s", self.controller_id, e)
                connection.close()
                self.stop.wait(0.5)
            except Exception:  # a bug in one decision must not stop the others for good
                logger.exception("controller %s: tick failed", self.controller_id)
                self.stop.wait(1.0)
            self.stop.wait(self.tick_s if self.lease is not None else min(self.tick_s, 0.25))
        if self.lease is not None:
            try:
                leases.release(self.lease)
                logger.info("controller %s released the lease", self.controller_id)
            except DatabaseError as e:
                logger.error("controller %s could not release the lease: %s", self.controller_id, e)
        self.lease = None
