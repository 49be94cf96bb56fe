"""``LeaderState``: the leader's view of one partition's replication (Kafka's ``Partition``
and ``Replica`` on the leader), as a pure state machine.

It tracks each follower's log end offset and ``lastCaughtUpTimeMs``, computes the high
watermark, decides ISR shrinks and expansions, and answers whether an acks=all produce is
done. It never changes the ISR itself: every change is an ``AlterPartitionRequest`` that the
caller sends to the controller, and only the controller's answer (``on_alter_partition_
response``) or newer metadata (``update_from_metadata``) commits it.

Rules (Kafka's, with the KIP noted where one applies):

- **Caught up** (``Replica.updateFetchState``): a fetch at offset >= the leader's log end
  offset now makes the follower caught up *now*; a fetch at offset >= the leader's log end
  offset *as of the previous fetch* makes it caught up as of that previous fetch.
- **Shrink**: an ISR follower whose ``now - last_caught_up_time_ms > replica.lag.time.max.ms``
  (and whose LEO is not already the leader's) is out of sync.
- **Expand**: an out-of-sync replica joins when its LEO >= the high watermark *and* >= the
  start offset of the current leader epoch (it has caught up into this epoch), and the
  controller does not know it as ineligible. Only one change is in flight at a time. An
  expansion the controller refused as INELIGIBLE_REPLICA (fenced, not live, or an older
  broker epoch than its registration) is not proposed again for that replica for
  ``REFUSED_EXPANSION_BACKOFF_MS``: every fetch of a caught-up follower would otherwise
  propose it again, and on a loaded cluster that storm of AlterPartition calls delayed the
  heartbeats that would make the replica eligible.
- **Pending ISR** (KIP-497): while a change is in flight the *maximal* ISR (committed ISR
  union proposed ISR) is used for the high watermark and for acks=all, as Kafka's
  ``PartitionState.maximalIsr`` is; ``len(committed ISR)`` is used for the
  ``min.insync.replicas`` checks. A shrink therefore takes effect only once accepted, an
  expansion counts against the HW at once.
- **High watermark** = min LEO over the leader and the maximal ISR; it advances only while
  ``len(ISR) >= min.insync.replicas`` (KIP-966's rule, stricter than classic Kafka, which
  lets the HW run ahead with the leader alone) and never moves back. A follower whose LEO the
  leader does not know yet (a new leader's followers before their first fetch) holds it.
- **acks=all**: NOT_ENOUGH_REPLICAS before appending if ``len(ISR) < min.insync.replicas``;
  a produce with last offset L completes when HW > L while ``len(maximal ISR) >= min``; if
  the ISR shrinks below min while it waits, NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from brokernodes.replication import errors
from brokernodes.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    end_offset_for,
)

UNKNOWN_OFFSET = -1
UNKNOWN_BROKER_EPOCH = -1
REFUSED_EXPANSION_BACKOFF_MS = 1000


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one follower (Kafka's ``ReplicaState``)."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """An ISR change for the controller (Kafka's AlterPartition, with KIP-903 broker epochs).

    ``new_isr`` lists ``(broker_id, broker_epoch)``; the controller rejects it if the leader
    or partition epoch is stale or a member is fenced, shutting down or has restarted.
    ``below_high_watermark`` names members dropped because they fetched below the HW: they
    miss committed records, so the controller never makes them eligible leaders (ELR).
    """

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]
    below_high_watermark: tuple[int, ...] = ()

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(b for b, _ in self.new_isr)


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    """The controller's answer: the committed ISR and partition epoch, or an error code."""

    error: str = errors.NONE
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


class AckStatus(Enum):
    """Where an acks=all produce stands (Kafka's ``checkEnoughReplicasReachOffset``)."""

    PENDING = "PENDING"
    COMPLETE = "COMPLETE"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


@dataclass(frozen=True, slots=True)
class FetchUpdate:
    """What one follower fetch changed on the leader."""

    high_watermark_changed: bool
    alter_partition: AlterPartitionRequest | None


class LeaderState:
    """One partition's replication state on its leader; see the module docstring.

    ``log_end_offset`` and ``high_watermark`` are the leader log's at the time it becomes
    leader; ``leader_epoch_start_offset`` is the log end offset when the epoch began (Kafka
    assigns the new epoch there). ``now_ms`` is injected everywhere; nothing reads a clock.
    """

    def __init__(
        self,
        *,
        broker_id: int,
        replicas: tuple[int, ...] | list[int],
        isr: tuple[int, ...] | list[int],
        leader_epoch: int,
        partition_epoch: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        leader_epoch_start_offset: int | None = None,
    ) -> None:
        if broker_id not in isr:
            raise ValueError(f"leader {broker_id} is not in the ISR {tuple(isr)}")
        self.broker_id = broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.log_end_offset = log_end_offset
        self.high_watermark = min(high_watermark, log_end_offset)
        self.leader_epoch_start_offset = (
            log_end_offset if leader_epoch_start_offset is None else leader_epoch_start_offset
        )
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.isr: frozenset[int] = frozenset(isr)
        self.pending: AlterPartitionRequest | None = None
        self.ineligible: frozenset[int] = frozenset()
        # replica -> until when (ms) an expansion adding it is not proposed (a refusal)
        self.refused_until: dict[int, int] = {}
        self._progress: dict[int, ReplicaProgress] = {}
        self._reset_followers(now_ms)

    def _reset_followers(self, now_ms: int) -> None:
        """A new leader gives ISR followers a full lag window; their LEOs are unknown until
        they fetch (Kafka's ``resetReplicaState``)."""
        for r in self.replicas:
            if r != self.broker_id and r not in self._progress:
                self._progress[r] = ReplicaProgress(
                    r,
                    last_caught_up_time_ms=now_ms if r in self.isr else 0,
                    last_fetch_leader_log_end_offset=self.log_end_offset,
                    last_fetch_time_ms=now_ms,
                )

    # --- views -------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR union the in-flight proposal (KIP-497)."""
        if self.pending is None:
            return self.isr
        return self.isr | frozenset(self.pending.isr)

    def progress(self, replica_id: int) -> ReplicaProgress:
        return self._progress[replica_id]

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_insync_replicas

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    # --- high watermark ----------------------------------------------------------------

    def _candidate_high_watermark(self) -> int:
        hw = self.log_end_offset
        for r in self.maximal_isr:
            if r != self.broker_id:
                p = self._progress.get(r)
                hw = min(hw, UNKNOWN_OFFSET if p is None else p.log_end_offset)
        return hw

    def maybe_advance_high_watermark(self) -> bool:
        """Move the HW to min LEO over the maximal ISR if that is higher and the ISR is at
        least ``min.insync.replicas``; True if it moved."""
        if self.under_min_isr:
            return False
        new = self._candidate_high_watermark()
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    # --- produce -----------------------------------------------------------------------

    def check_append(self, acks: int) -> str:
        """Before appending: NOT_ENOUGH_REPLICAS for acks=all under min ISR, else NONE."""
        if acks == -1 and self.under_min_isr:
            return errors.NOT_ENOUGH_REPLICAS
        return errors.NONE

    def on_leader_append(self, log_end_offset: int) -> bool:
        """The leader's log grew to ``log_end_offset``; True if the HW moved (ISR of one)."""
        if log_end_offset < self.log_end_offset:
            raise ValueError("a leader's log end offset never moves back")
        self.log_end_offset = log_end_offset
        return self.maybe_advance_high_watermark()

    def check_acks_all(self, last_offset: int) -> AckStatus:
        """acks=all for a produce whose last record is at ``last_offset``."""
        if len(self.maximal_isr) < self.min_insync_replicas:
            return AckStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if self.high_watermark > last_offset:
            return AckStatus.COMPLETE
        return AckStatus.PENDING

    # --- follower fetches --------------------------------------------------------------

    def validate_fetch(self, replica_id: int, current_leader_epoch: int) -> str:
        """Check a replica fetch before reading (KIP-320): a follower on an older epoch is
        FENCED_LEADER_EPOCH, a newer one (this leader is stale) UNKNOWN_LEADER_EPOCH, a
        broker outside the assignment NOT_LEADER_OR_FOLLOWER."""
        if current_leader_epoch < self.leader_epoch:
            return errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return errors.UNKNOWN_LEADER_EPOCH
        if replica_id not in self._progress:
            return errors.NOT_LEADER_OR_FOLLOWER
        return errors.NONE

    def update_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        now_ms: int,
        broker_epoch: int = UNKNOWN_BROKER_EPOCH,
    ) -> FetchUpdate:
        """A follower fetched from ``fetch_offset``: it holds everything below it.

        Updates its LEO and caught-up time, may propose an ISR expansion, may advance the HW.
        A fetch from a replica outside the assignment is ignored (the caller answers
        NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH before reaching here).
        """
        p = self._progress.get(replica_id)
        if p is None:
            return FetchUpdate(False, None)
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            # Carried into ISR proposals so the controller can refuse a restarted replica.
            p.broker_epoch = broker_epoch
        leo = self.log_end_offset
        if fetch_offset >= leo:
            p.last_caught_up_time_ms = max(p.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= p.last_fetch_leader_log_end_offset:
            p.last_caught_up_time_ms = max(p.last_caught_up_time_ms, p.last_fetch_time_ms)
        p.log_end_offset = fetch_offset
        p.last_fetch_leader_log_end_offset = leo
        p.last_fetch_time_ms = now_ms
        if replica_id in self.isr and fetch_offset < self.high_watermark:
            # An ISR member fetching below the HW no longer holds committed records (its
            # log was repaired or lost its tail): out of the ISR at once, not after the lag
            # time, so no election picks it before it has fetched them again.
            proposal = (
                None
                if self.pending is not None
                else self._propose(self.isr - {replica_id}, below_hw=(replica_id,))
            )
            return FetchUpdate(False, proposal)
        proposal = self._maybe_expand_isr(p, now_ms)
        return FetchUpdate(self.maybe_advance_high_watermark(), proposal)

    def _is_follower_in_sync(self, p: ReplicaProgress) -> bool:
        return (
            p.log_end_offset >= self.high_watermark
            and p.log_end_offset >= self.leader_epoch_start_offset
        )

    def _maybe_expand_isr(self, p: ReplicaProgress, now_ms: int) -> AlterPartitionRequest | None:
        if (
            self.pending is not None
            or p.replica_id in self.isr
            or p.replica_id in self.ineligible
            or self.refused_until.get(p.replica_id, 0) > now_ms
            or not self._is_follower_in_sync(p)
        ):
            return None
        return self._propose(self.isr | {p.replica_id})

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        """ISR followers that have not caught up within ``replica.lag.time.max.ms``."""
        out = set()
        for r in self.isr:
            if r == self.broker_id:
                continue
            p = self._progress.get(r)
            if (
                p is None
                or r in self.ineligible
                or self._below_high_watermark(r)
                or (
                    p.log_end_offset != self.log_end_offset
                    and now_ms - p.last_caught_up_time_ms > self.replica_lag_time_max_ms
                )
            ):
                out.add(r)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionRequest | None:
        """Kafka's ISR expiration task: propose dropping out-of-sync followers (run it every
        ``replica.lag.time.max.ms / 2``). Nothing while another change is in flight."""
        if self.pending is not None:
            return None
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return None
        below = tuple(sorted(r for r in out if self._below_high_watermark(r)))
        return self._propose(self.isr - out, below_hw=below)

    def _below_high_watermark(self, replica_id: int) -> bool:
        p = self._progress.get(replica_id)
        return p is not None and UNKNOWN_OFFSET < p.log_end_offset < self.high_watermark

    def _propose(
        self, isr: frozenset[int], *, below_hw: tuple[int, ...] = ()
    ) -> AlterPartitionRequest:
        members = tuple(
            (r, UNKNOWN_BROKER_EPOCH if r == self.broker_id else self._progress[r].broker_epoch)
            for r in sorted(isr)
        )
        self.pending = AlterPartitionRequest(
            self.broker_id, self.leader_epoch, self.partition_epoch, members, below_hw
        )
        return self.pending

    # --- controller answers ------------------------------------------------------------

    def on_alter_partition_response(
        self, response: AlterPartitionResponse, now_ms: int = 0
    ) -> bool:
        """Commit (or drop) the in-flight change; True if the HW moved.

        An error clears the pending change (Kafka then waits for metadata; the next fetch or
        expiration pass proposes again from the committed ISR); an INELIGIBLE_REPLICA
        refusal of an expansion holds the added replicas back for
        ``REFUSED_EXPANSION_BACKOFF_MS`` from ``now_ms``. An answer older than what this
        leader already knows is ignored.
        """
        if self.pending is None:
            return False
        if response.error != errors.NONE:
            if response.error == errors.INELIGIBLE_REPLICA:
                for r in set(self.pending.isr) - self.isr:
                    self.refused_until[r] = now_ms + REFUSED_EXPANSION_BACKOFF_MS
            self.pending = None
            return False
        if response.partition_epoch <= self.partition_epoch:
            return False
        return self.update_from_metadata(
            isr=response.isr,
            leader_epoch=response.leader_epoch,
            partition_epoch=response.partition_epoch,
        )

    def update_from_metadata(
        self,
        *,
        isr: tuple[int, ...] | list[int] | frozenset[int],
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...] | list[int] | None = None,
        ineligible: frozenset[int] | None = None,
        now_ms: int | None = None,
    ) -> bool:
        """Newer partition state from the controller (same leader epoch, higher partition
        epoch): it replaces the committed ISR and clears the pending change. Stale state is
        ignored. True if the HW moved."""
        if ineligible is not None:
            self.ineligible = frozenset(ineligible)
        if leader_epoch != self.leader_epoch or partition_epoch <= self.partition_epoch:
            return False
        self.partition_epoch = partition_epoch
        self.isr = frozenset(isr)
        self.pending = None
        if replicas is not None:
            self.replicas = tuple(replicas)
            for r in list(self._progress):
                if r not in self.replicas:
                    del self._progress[r]
            self._reset_followers(0 if now_ms is None else now_ms)
        return self.maybe_advance_high_watermark()

    # --- OffsetsForLeaderEpoch ---------------------------------------------------------

    def offsets_for_leader_epoch(
        self, entries: list[EpochEntry], current_leader_epoch: int, requested_epoch: int
    ) -> tuple[str, int, int]:
        """Answer a follower: ``(error, epoch, end_offset)`` from the leader's epoch entries.

        ``current_leader_epoch`` is the epoch the follower believes current (KIP-320):
        lower than ours is FENCED_LEADER_EPOCH, higher is UNKNOWN_LEADER_EPOCH.
        """
        return answer_offsets_for_leader_epoch(
            entries, self.log_end_offset, self.leader_epoch, current_leader_epoch, requested_epoch
        )


def answer_offsets_for_leader_epoch(
    entries: list[EpochEntry],
    log_end_offset: int,
    leader_epoch: int,
    current_leader_epoch: int,
    requested_epoch: int,
) -> tuple[str, int, int]:
    """The leader side of OffsetsForLeaderEpoch, fenced by the requester's current epoch."""
    if current_leader_epoch < leader_epoch:
        return errors.FENCED_LEADER_EPOCH, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if current_leader_epoch > leader_epoch:
        return errors.UNKNOWN_LEADER_EPOCH, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    epoch, end = end_offset_for(entries, requested_epoch, log_end_offset)
    return errors.NONE, epoch, end
