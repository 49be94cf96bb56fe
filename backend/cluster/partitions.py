"""Between the database rows and the pure controller core (``brokernodes.replication.
controller``): a ``PartitionAssignment`` as a ``PartitionRegistration`` and back, the brokers
as a ``BrokerView``, a topic's replication configs, and a partition's health flags.

No writes happen here; ``services`` and ``controller`` apply the core's decisions.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from backend.cluster.models import Broker, PartitionAssignment, ReplicaLogReport
from brokernodes.replication.controller import BrokerView, PartitionRegistration, ReplicaLog

UNCLEAN_CONFIG = "unclean.leader.election.enable"


def registration(a: PartitionAssignment) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(a.replicas),
        isr=tuple(a.isr),
        leader=int(a.leader),
        leader_epoch=int(a.leader_epoch),
        partition_epoch=int(a.partition_epoch),
        elr=tuple(a.elr or ()),
        last_known_elr=tuple(a.last_known_elr or ()),
        adding_replicas=tuple(a.adding_replicas or ()),
        removing_replicas=tuple(a.removing_replicas or ()),
    )


def apply(a: PartitionAssignment, reg: PartitionRegistration) -> None:
    """Copy ``reg`` onto the row and save it (the caller holds the metadata lock)."""
    a.replicas = list(reg.replicas)
    a.isr = list(reg.isr)
    a.leader = reg.leader
    a.leader_epoch = reg.leader_epoch
    a.partition_epoch = reg.partition_epoch
    a.elr = list(reg.elr)
    a.last_known_elr = list(reg.last_known_elr)
    a.adding_replicas = list(reg.adding_replicas)
    a.removing_replicas = list(reg.removing_replicas)
    a.save(
        update_fields=[
            "replicas",
            "isr",
            "leader",
            "leader_epoch",
            "partition_epoch",
            "elr",
            "last_known_elr",
            "adding_replicas",
            "removing_replicas",
        ]
    )


def session_horizon():
    """Heartbeats before this instant are too old: the broker's session has expired."""
    return timezone.now() - timedelta(seconds=float(settings.SLUICE_BROKER_SESSION_TIMEOUT_S))


def broker_view(*, exclude: frozenset[int] = frozenset()) -> BrokerView:
    """Live = registered, unfenced and heartbeating within the session timeout."""
    horizon = session_horizon()
    live, epochs, down = set(), {}, set()
    for b in Broker.objects.all():
        epochs[b.broker_id] = int(b.epoch)
        if not b.fenced and b.last_heartbeat_at >= horizon and b.broker_id not in exclude:
            live.add(b.broker_id)
        if b.shutting_down:
            down.add(b.broker_id)
    return BrokerView(frozenset(live), epochs, frozenset(down))


def replica_logs(pks, view: BrokerView) -> dict[int, dict[int, ReplicaLog]]:
    """Per assignment id, the log reports (``ReplicaLogReport``) that each broker made in its
    current registration; older ones do not count."""
    out: dict[int, dict[int, ReplicaLog]] = {}
    for r in ReplicaLogReport.objects.filter(assignment_id__in=pks):
        if view.broker_epochs.get(r.broker_id) == r.broker_epoch:
            out.setdefault(r.assignment_id, {})[r.broker_id] = ReplicaLog(
                r.last_leader_epoch, r.log_end_offset
            )
    return out


def min_isr(topic) -> int:
    try:
        return max(1, int(topic.configs.get("min.insync.replicas", 1)))
    except (TypeError, ValueError):
        return 1


def unclean_enabled(topic) -> bool:
    return str(topic.configs.get(UNCLEAN_CONFIG, "false")).lower() == "true"


def offline(a: PartitionAssignment) -> bool:
    """No leader: nobody can produce to or consume from it."""
    return int(a.leader) < 0


def under_replicated(a: PartitionAssignment) -> bool:
    """Online, but some replica it should have (not one still being added) is out of the
    ISR (Kafka's UnderReplicatedPartitions)."""
    if offline(a):
        return False
    adding = set(a.adding_replicas or ())
    return any(r not in a.isr for r in a.replicas if r not in adding)


def state_of(a: PartitionAssignment) -> dict:
    """The partition as operators and tenants see it."""
    return {
        "partition": a.partition,
        "leader": a.leader,
        "leader_epoch": a.leader_epoch,
        "replicas": list(a.replicas),
        "isr": list(a.isr),
        "elr": list(a.elr or ()),
        "last_known_elr": list(a.last_known_elr or ()),
        "adding_replicas": list(a.adding_replicas or ()),
        "removing_replicas": list(a.removing_replicas or ()),
        "under_replicated": under_replicated(a),
        "offline": offline(a),
    }
