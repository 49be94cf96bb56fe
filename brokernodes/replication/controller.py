"""Pure controller decisions over one partition's registration (KRaft's
``ReplicationControlManager`` and ``PartitionChangeBuilder``), for the control plane's
controller to apply under its lease.

Every function takes an immutable ``PartitionRegistration`` and a ``BrokerView`` and returns a
new registration (or a result holding one); nothing is stored here. Every change bumps the
partition epoch; every leader change also bumps the leader epoch, which fences the old leader
(its ``AlterPartition`` and its followers' fetches carry the old epoch).

Leader eligibility, in order (clean election):
1. live ISR members, preferred replica (first in ``replicas``) first, then replica order;
2. live *eligible leader replicas* (ELR, KIP-966): members removed from the ISR while it was
   below ``min.insync.replicas``. The HW cannot advance under min ISR, so they hold every
   committed record. The last ISR member never simply vanishes: fenced, it goes to the ELR.
   A replica restarting after an unclean shutdown (it may have lost its unflushed tail)
   leaves the ISR and the ELR, into the *last known ELR* (KIP-966's ``LastKnownElr``).
3. unclean recovery (KIP-966's balanced strategy, ``recover_leader``): when the ISR and the
   ELR are both empty, once every last known ELR member is back and has reported its log
   (last leader epoch, log end offset), the one with the longest log leads. Flagged
   ``recovered``: only records that every one of them lost (an unflushed tail after a
   machine crash) can be missing.
4. only if the topic enables ``unclean.leader.election.enable``: any live replica, and the
   result is flagged ``unclean`` (acknowledged records may be lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from brokernodes.replication import errors
from brokernodes.replication.leader import UNKNOWN_BROKER_EPOCH, AlterPartitionRequest

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """A partition as the controller records it (KRaft's ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def offline(self) -> bool:
        return self.leader == NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)


@dataclass(frozen=True, slots=True)
class BrokerView:
    """What the controller knows of the brokers: registered and unfenced (``live``), their
    current broker epochs (KIP-903), and those in controlled shutdown (KIP-841)."""

    live: frozenset[int]
    broker_epochs: Mapping[int, int] = field(default_factory=dict)
    shutting_down: frozenset[int] = frozenset()

    def eligible(self, broker: int) -> bool:
        """May lead or join an ISR: live and not shutting down."""
        return broker in self.live and broker not in self.shutting_down


@dataclass(frozen=True, slots=True)
class Election:
    """The outcome of an election: the new registration, and whether it was unclean."""

    registration: PartitionRegistration
    leader: int
    unclean: bool = False
    from_elr: bool = False
    recovered: bool = False


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """What a replica reports of its log for an unclean recovery (KIP-966's
    GetReplicaLogInfo): the epoch of its last leader-epoch entry (-1: none) and its log end."""

    last_leader_epoch: int
    log_end_offset: int


def _sorted_like(members: Iterable[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    ms = set(members)
    return tuple(r for r in replicas if r in ms) + tuple(sorted(ms - set(replicas)))


def _shrink_isr(
    reg: PartitionRegistration,
    new_isr: Iterable[int],
    min_isr: int,
    below_high_watermark: Iterable[int] = (),
) -> PartitionRegistration:
    """Apply a new ISR with KIP-966's ELR rule: members leaving while the ISR ends below
    ``min_isr`` become eligible leader replicas; an ISR back at ``min_isr`` clears the ELR.
    A member the leader saw below the HW misses committed records and never enters the ELR
    (KIP-966's rule assumes a member leaving the ISR holds everything up to the HW)."""
    isr = _sorted_like(new_isr, reg.replicas)
    if len(isr) >= min_isr:
        elr: tuple[int, ...] = ()
    else:
        removed = [r for r in reg.isr if r not in isr and r not in set(below_high_watermark)]
        elr = _sorted_like((set(reg.elr) | set(removed)) - set(isr), reg.replicas)
    return replace(reg, isr=isr, elr=elr)


def _bump(reg: PartitionRegistration, *, leader: int | None = None) -> PartitionRegistration:
    if leader is None or leader == reg.leader:
        return replace(reg, partition_epoch=reg.partition_epoch + 1)
    return replace(
        reg,
        leader=leader,
        leader_epoch=reg.leader_epoch + 1,
        partition_epoch=reg.partition_epoch + 1,
    )


def choose_leader(
    reg: PartitionRegistration, brokers: BrokerView, *, unclean_enabled: bool = False
) -> tuple[int, bool, bool] | None:
    """``(leader, unclean, from_elr)`` by the eligibility order in the module docstring, or
    None when no replica may lead (the partition stays offline)."""
    for r in reg.replicas:
        if r in reg.isr and brokers.eligible(r):
            return r, False, False
    for r in reg.replicas:
        if r in reg.elr and brokers.eligible(r):
            return r, False, True
    if unclean_enabled:
        for r in reg.replicas:
            if brokers.eligible(r):
                return r, True, False
    return None


def elect_leader(
    reg: PartitionRegistration,
    brokers: BrokerView,
    *,
    unclean_enabled: bool = False,
) -> Election | None:
    """Elect a leader (new epoch) for a partition whose leader is gone or must move.

    The current leader stays (no change) if it is still the first eligible ISR member. When
    no replica is eligible: an ``Election`` of ``NO_LEADER`` (new epoch, partition offline)
    if there was a leader, None if the partition was already offline. From the ELR or
    uncleanly, the new ISR is the leader alone."""
    choice = choose_leader(reg, brokers, unclean_enabled=unclean_enabled)
    if choice is None:
        if reg.leader == NO_LEADER:
            return None
        return Election(_bump(reg, leader=NO_LEADER), NO_LEADER)
    leader, unclean, from_elr = choice
    new = reg
    if unclean:
        new = replace(reg, isr=(leader,), elr=())
    elif from_elr:
        new = replace(reg, isr=(leader,), elr=tuple(r for r in reg.elr if r != leader))
    if leader == reg.leader and new == reg:
        return Election(reg, leader)
    new = replace(
        new,
        last_known_elr=(),  # a leader holding every committed record: nothing to recover
        leader=leader,
        leader_epoch=reg.leader_epoch + 1,
        partition_epoch=reg.partition_epoch + 1,
    )
    return Election(new, leader, unclean=unclean, from_elr=from_elr)


def fence_broker(
    reg: PartitionRegistration,
    broker: int,
    brokers: BrokerView,
    *,
    min_isr: int,
    unclean_enabled: bool = False,
) -> Election | None:
    """``broker`` missed its heartbeats (or began controlled shutdown): drop it from the ISR
    (into the ELR if the ISR falls below ``min_isr``) and re-elect if it led. ``brokers``
    must already exclude it. None if the partition does not change."""
    if broker not in reg.isr and broker != reg.leader:
        return None
    new = _shrink_isr(reg, (r for r in reg.isr if r != broker), min_isr)
    if reg.leader == broker:
        moved = elect_leader(new, brokers, unclean_enabled=unclean_enabled)
        assert moved is not None  # the leader was set, so at least NO_LEADER comes back
        return moved
    return Election(_bump(new), reg.leader)


def unclean_restart(reg: PartitionRegistration, broker: int) -> PartitionRegistration | None:
    """``broker`` registered again after an unclean shutdown: it may have lost its unflushed
    tail, so it leaves the ISR and the ELR (KIP-966) and must catch up to rejoin. It joins the
    last known ELR: if every eligible replica restarts so, ``recover_leader`` chooses among
    them rather than leaving the partition offline for ever."""
    if broker not in reg.isr and broker not in reg.elr:
        return None
    new = replace(
        reg,
        isr=tuple(r for r in reg.isr if r != broker),
        elr=tuple(r for r in reg.elr if r != broker),
        last_known_elr=_sorted_like({*reg.last_known_elr, broker}, reg.replicas),
    )
    if reg.leader == broker:
        return _bump(new, leader=NO_LEADER)
    return _bump(new)


def recovery_waits_for(
    reg: PartitionRegistration, brokers: BrokerView, logs: Mapping[int, ReplicaLog]
) -> tuple[int, ...]:
    """The last known ELR members an unclean recovery still waits for: not eligible (fenced,
    gone, shutting down) or without a log report from their current registration."""
    return tuple(r for r in reg.last_known_elr if not brokers.eligible(r) or r not in logs)


def recover_leader(
    reg: PartitionRegistration, brokers: BrokerView, logs: Mapping[int, ReplicaLog]
) -> Election | None:
    """KIP-966's balanced unclean recovery for an offline partition whose ISR and ELR are
    both empty: once every last known ELR member is eligible and reported in ``logs``, the
    one with the longest log leads (the highest last leader epoch, then the largest log end;
    ties in replica order) with an ISR of itself. Its followers truncate to it by leader
    epoch, as after any election. None while it must wait, or when this does not apply."""
    if not reg.offline or reg.isr or reg.elr or not reg.last_known_elr:
        return None
    if recovery_waits_for(reg, brokers, logs):
        return None
    order = {r: i for i, r in enumerate(reg.replicas)}
    leader = max(
        reg.last_known_elr,
        key=lambda r: (
            logs[r].last_leader_epoch,
            logs[r].log_end_offset,
            -order.get(r, len(order)),
        ),
    )
    new = replace(reg, isr=(leader,), elr=(), last_known_elr=())
    return Election(_bump(new, leader=leader), leader, recovered=True)


def offline_reason(
    reg: PartitionRegistration,
    brokers: BrokerView,
    logs: Mapping[int, ReplicaLog] | None = None,
    *,
    unclean_enabled: bool = False,
) -> str:
    """Why an offline partition has no leader yet and what brings it back, for operators
    (the internal partitions route, ``make up``) and the controller's log."""
    if not reg.replicas:
        return "not placed yet: it gets replicas once a broker is live"
    if reg.isr or reg.elr:
        members = _sorted_like({*reg.isr, *reg.elr}, reg.replicas)
        return (
            f"waiting for an in-sync or eligible replica ({_ids(members)}) to come back; "
            f"the controller elects it at once"
        )
    if reg.last_known_elr:
        waiting = recovery_waits_for(reg, brokers, logs or {})
        if not waiting:
            return (
                f"every eligible replica restarted uncleanly and reported its log: the "
                f"controller elects the longest among {_ids(reg.last_known_elr)}"
            )
        return (
            f"every eligible replica restarted uncleanly: unclean recovery waits for "
            f"{_ids(waiting)} to be back and report their logs, then elects the longest log "
            f"among {_ids(reg.last_known_elr)}"
        )
    if unclean_enabled:
        return "no eligible replica: waiting for any replica to come back (unclean election)"
    return (
        "no replica is known to hold every acknowledged record; setting the topic's "
        "unclean.leader.election.enable=true elects any live replica (records may be lost)"
    )


def _ids(brokers: Iterable[int]) -> str:
    return "brokers " + ", ".join(str(b) for b in brokers)


def elect_offline(
    reg: PartitionRegistration,
    brokers: BrokerView,
    *,
    logs: Mapping[int, ReplicaLog] | None = None,
    unclean_enabled: bool = False,
) -> Election | None:
    """A leader for an offline partition, in the module docstring's order: clean (ISR,
    ELR), then unclean recovery among the last known ELR, then (opted in) unclean. None
    while none may lead."""
    clean = elect_leader(reg, brokers)
    if clean is not None and clean.leader != NO_LEADER:
        return clean
    recovered = recover_leader(reg, brokers, logs or {})
    if recovered is not None:
        return recovered
    if unclean_enabled:
        forced = elect_leader(reg, brokers, unclean_enabled=True)
        if forced is not None and forced.leader != NO_LEADER:
            return forced
    return None


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    error: str
    registration: PartitionRegistration


def alter_partition(
    reg: PartitionRegistration,
    request: AlterPartitionRequest,
    brokers: BrokerView,
    *,
    min_isr: int,
) -> AlterPartitionResult:
    """Validate and apply a leader's ISR change (KRaft's AlterPartition handling).

    Refuses: a request not from the current leader (NOT_LEADER_OR_FOLLOWER) or from another
    leader epoch (FENCED_LEADER_EPOCH); a stale partition epoch (INVALID_UPDATE_VERSION); an
    ISR without the leader, with non-replicas, or empty (INVALID_REQUEST); a member that is
    fenced, shutting down, or whose broker epoch is not its current one (INELIGIBLE_REPLICA).
    On success the partition epoch goes up, the ELR follows KIP-966, the last known ELR is
    cleared, and a reassignment whose target replicas are now all in the ISR completes.
    """
    if request.leader_id != reg.leader:
        return AlterPartitionResult(errors.NOT_LEADER_OR_FOLLOWER, reg)
    if request.leader_epoch != reg.leader_epoch:
        return AlterPartitionResult(errors.FENCED_LEADER_EPOCH, reg)
    if request.partition_epoch != reg.partition_epoch:
        return AlterPartitionResult(errors.INVALID_UPDATE_VERSION, reg)
    new_isr = request.isr
    if (
        not new_isr
        or reg.leader not in new_isr
        or len(set(new_isr)) != len(new_isr)
        or any(r not in reg.replicas for r in new_isr)
    ):
        return AlterPartitionResult(errors.INVALID_REQUEST, reg)
    added = set(new_isr) - set(reg.isr)
    for broker, broker_epoch in request.new_isr:
        if broker == reg.leader:
            continue
        if broker in added and not brokers.eligible(broker):
            return AlterPartitionResult(errors.INELIGIBLE_REPLICA, reg)
        if broker not in brokers.live:
            return AlterPartitionResult(errors.INELIGIBLE_REPLICA, reg)
        current = brokers.broker_epochs.get(broker, UNKNOWN_BROKER_EPOCH)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch != current:
            return AlterPartitionResult(errors.INELIGIBLE_REPLICA, reg)
    new = _shrink_isr(reg, new_isr, min_isr, request.below_high_watermark)
    # a working leader's ISR holds every committed record: no recovery list is needed
    new = replace(new, elr=tuple(r for r in new.elr if r not in new.isr), last_known_elr=())
    new = _bump(new)
    done = maybe_complete_reassignment(new, brokers)
    return AlterPartitionResult(errors.NONE, done if done is not None else new)


# --- preferred leaders ------------------------------------------------------------------------


def preferred_leader_election(
    reg: PartitionRegistration, brokers: BrokerView
) -> PartitionRegistration | None:
    """Move leadership to the preferred replica if it is in the ISR and eligible; None when
    it already leads or cannot (Kafka's PreferredReplicaPartitionLeaderElectionStrategy)."""
    p = reg.preferred_leader
    if p == reg.leader or p not in reg.isr or not brokers.eligible(p):
        return None
    return _bump(reg, leader=p)


def plan_preferred_rebalance(
    partitions: Mapping[object, PartitionRegistration],
    brokers: BrokerView,
    *,
    imbalance_percentage: int = 10,
) -> list[object]:
    """Partitions to give back to their preferred leaders (``auto.leader.rebalance``).

    As Kafka's controller: per preferred broker, the share of its partitions it does not
    lead; brokers above ``leader.imbalance.per.broker.percentage`` get every such partition
    whose preferred replica can lead (in ISR, live, not shutting down). Sorted keys.
    """
    preferred: dict[int, list[object]] = {}
    for key, reg in partitions.items():
        if reg.replicas:
            preferred.setdefault(reg.preferred_leader, []).append(key)
    out: list[object] = []
    for broker, keys in preferred.items():
        if not brokers.eligible(broker):
            continue
        not_led = [k for k in keys if partitions[k].leader != broker]
        if not_led and len(not_led) * 100 > imbalance_percentage * len(keys):
            out.extend(
                k for k in not_led if preferred_leader_election(partitions[k], brokers) is not None
            )
    return sorted(out, key=repr)


# --- reassignment ------------------------------------------------------------------------------


def start_reassignment(reg: PartitionRegistration, target: Iterable[int]) -> PartitionRegistration:
    """Begin moving the partition to ``target`` replicas (Kafka's KIP-455 steps).

    Replicas become target + (current - target), with ``adding_replicas`` (target - current)
    and ``removing_replicas`` (current - target). The added replicas start as followers
    outside the ISR; ``maybe_complete_reassignment`` finishes once they all joined the ISR.
    A target equal to the current replicas (or a re-targeting) is allowed; an empty or
    duplicated target is a ValueError.
    """
    tgt = tuple(target)
    if not tgt or len(set(tgt)) != len(tgt):
        raise ValueError(f"invalid target replicas {tgt}")
    original = tuple(r for r in reg.replicas if r not in reg.adding_replicas)
    current = set(reg.replicas)
    replicas = tgt + tuple(r for r in original if r not in tgt)
    adding = tuple(r for r in tgt if r not in original)
    removing = tuple(r for r in original if r not in tgt)
    # Replicas added by an earlier, abandoned target leave at once (they never joined).
    dropped = current - set(replicas)
    new = replace(
        reg,
        replicas=replicas,
        isr=tuple(r for r in reg.isr if r not in dropped),
        elr=tuple(r for r in reg.elr if r not in dropped),
        last_known_elr=tuple(r for r in reg.last_known_elr if r not in dropped),
        adding_replicas=adding,
        removing_replicas=removing,
    )
    return _bump(new)


def maybe_complete_reassignment(
    reg: PartitionRegistration, brokers: BrokerView
) -> PartitionRegistration | None:
    """Finish a reassignment once every target replica is in the ISR: drop the removed
    replicas from replicas/ISR/ELR and, if the leader is being removed, elect one from the
    target ISR (preferred first). None while waiting or when nothing is in progress."""
    if not reg.reassigning:
        return None
    target = reg.target_replicas
    if any(r not in reg.isr for r in target):
        return None
    new = replace(
        reg,
        replicas=target,
        isr=tuple(r for r in target if r in reg.isr),
        elr=tuple(r for r in reg.elr if r in target),
        last_known_elr=tuple(r for r in reg.last_known_elr if r in target),
        adding_replicas=(),
        removing_replicas=(),
    )
    if new.leader not in target:
        for r in target:
            if r in new.isr and brokers.eligible(r):
                return _bump(new, leader=r)
        return None  # no target replica can lead yet: keep reassigning
    return _bump(new)


def cancel_reassignment(reg: PartitionRegistration) -> PartitionRegistration | None:
    """Revert to the original replicas (those not being added); None if none in progress."""
    if not reg.reassigning:
        return None
    original = tuple(r for r in reg.replicas if r not in reg.adding_replicas)
    isr = tuple(r for r in original if r in reg.isr) or reg.isr
    return _bump(
        replace(
            reg,
            replicas=original,
            isr=isr,
            elr=tuple(r for r in reg.elr if r in original),
            last_known_elr=tuple(r for r in reg.last_known_elr if r in original),
            adding_replicas=(),
            removing_replicas=(),
        )
    )


def place_partition_increase(
    existing: Iterable[Iterable[int]], brokers: Iterable[int], count: int
) -> list[tuple[int, ...]]:
    """Replica lists for ``count`` new partitions of a topic whose partitions hold
    ``existing`` replica lists (first = preferred leader); replication factor as theirs.

    Load-aware round robin over the live brokers: each new partition's leader is the broker
    preferred-leading the fewest partitions of the topic, its followers those holding the
    fewest replicas (ties by id). Raises ValueError if there are fewer brokers than the RF.
    """
    lists = [tuple(r) for r in existing]
    ids = sorted(set(brokers))
    rf = len(lists[0]) if lists else 1
    if len(ids) < rf:
        raise ValueError(f"{len(ids)} live brokers cannot hold replication factor {rf}")
    leaders = {b: 0 for b in ids}
    replicas = {b: 0 for b in ids}
    for rs in lists:
        for i, b in enumerate(rs):
            if b in replicas:
                replicas[b] += 1
                if i == 0:
                    leaders[b] += 1
    out: list[tuple[int, ...]] = []
    for _ in range(count):
        leader = min(ids, key=lambda b: (leaders[b], replicas[b], b))
        followers = sorted((b for b in ids if b != leader), key=lambda b: (replicas[b], b))
        chosen = (leader, *followers[: rf - 1])
        leaders[leader] += 1
        for b in chosen:
            replicas[b] += 1
        out.append(chosen)
    return out


# --- controlled shutdown ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShutdownPlan:
    """Per partition, the new registration; ``stuck`` lists partitions the broker still
    leads because no other replica may (the broker waits, or shuts down after a timeout)."""

    changes: dict[object, PartitionRegistration]
    stuck: list[object]


def controlled_shutdown(
    partitions: Mapping[object, PartitionRegistration],
    broker: int,
    brokers: BrokerView,
    *,
    min_isr: int,
) -> ShutdownPlan:
    """Move leadership away from ``broker`` and drop it from ISRs before it stops.

    ``brokers`` should list ``broker`` in ``shutting_down``. A partition it leads moves to
    another eligible ISR member; where it is the only one it keeps leading (``stuck``), as
    Kafka keeps the last ISR member. Elsewhere it leaves the ISR (to the ELR under min ISR:
    a clean stop loses nothing).
    """
    changes: dict[object, PartitionRegistration] = {}
    stuck: list[object] = []
    for key, reg in partitions.items():
        if broker not in reg.replicas:
            continue
        if reg.leader == broker:
            others = [r for r in reg.isr if r != broker and brokers.eligible(r)]
            if not others:
                stuck.append(key)
                continue
            shrunk = _shrink_isr(reg, (r for r in reg.isr if r != broker), min_isr)
            elected = elect_leader(shrunk, brokers)
            assert elected is not None and elected.leader in others
            changes[key] = elected.registration
        elif broker in reg.isr and len(reg.isr) > 1:
            changes[key] = _bump(_shrink_isr(reg, (r for r in reg.isr if r != broker), min_isr))
    return ShutdownPlan(changes, sorted(stuck, key=repr))
