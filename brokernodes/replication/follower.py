"""``FollowerState``: what a follower replica does next (Kafka's ``AbstractFetcherThread``
for one partition), as a pure state machine.

A follower of a new leader epoch first *truncates*: it sends OffsetsForLeaderEpoch with its
latest epoch, and cuts its log where it diverges from the leader's (KIP-101), repeating with
earlier epochs when the leader answers with an epoch the follower does not have (KIP-279).
It never truncates to its local high watermark: that is what loses acknowledged records when
leaders change quickly. Then it *fetches* from its log end offset, carrying the leader epoch
it believes current so a stale leader or follower is fenced (KIP-320).

The log and the epoch cache stay with the caller: decisions take the follower's epoch entries
and log end offset as values and return what to do (``TruncationDecision``).
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


class FollowerPhase(Enum):
    TRUNCATING = "TRUNCATING"
    FETCHING = "FETCHING"


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    """What to do to the local log after an OffsetsForLeaderEpoch answer.

    ``truncate_to``: call ``PartitionLog.truncate_to`` (a no-op at or above the LEO).
    ``start_at``: call ``truncate_fully_and_start_at`` instead (set with ``truncate_to=None``).
    ``completed``: False means truncate, then ask again with the new latest epoch (KIP-279).
    """

    truncate_to: int | None
    completed: bool
    start_at: int | None = None


@dataclass(frozen=True, slots=True)
class EpochRequest:
    """OffsetsForLeaderEpoch for one partition: ``requested_epoch`` fenced by
    ``current_leader_epoch``."""

    replica_id: int
    current_leader_epoch: int
    requested_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A replica fetch from ``fetch_offset`` (the follower's LEO) under ``current_leader_epoch``."""

    replica_id: int
    fetch_offset: int
    current_leader_epoch: int
    broker_epoch: int


def truncation_decision(
    follower_entries: list[EpochEntry],
    follower_log_end_offset: int,
    leader_epoch: int,
    leader_end_offset: int,
    leader_log_start_offset: int,
) -> TruncationDecision:
    """The truncation offset for a leader's answer ``(leader_epoch, leader_end_offset)``.

    - Leader answered UNDEFINED (it knows no epoch at or below the one asked for: an empty
      leader log, e.g. after an unclean election or a new reassigned replica): nothing local
      can be matched with the leader, so restart the log empty at the leader's log start.
      Kafka falls back to the follower's high watermark here; Sluice never truncates by HW.
    - The follower has ``leader_epoch`` too: truncate to min(leader's end offset, the
      follower's end offset for that epoch, the follower's LEO). Done.
    - The follower's largest epoch <= ``leader_epoch`` is a different one: truncate to its end
      and ask again (KIP-279), which converges in at most one round per epoch.
    """
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationDecision(None, True, start_at=leader_log_start_offset)
    if not follower_entries:
        return TruncationDecision(min(leader_end_offset, follower_log_end_offset), True)
    f_epoch, f_end = end_offset_for(follower_entries, leader_epoch, follower_log_end_offset)
    if f_epoch == UNDEFINED_EPOCH:  # cannot happen: the leader answers <= the asked epoch
        return TruncationDecision(min(leader_end_offset, follower_log_end_offset), True)
    if f_epoch != leader_epoch:
        return TruncationDecision(min(f_end, follower_log_end_offset), False)
    return TruncationDecision(min(f_end, leader_end_offset, follower_log_end_offset), True)


def out_of_range_decision(
    follower_log_end_offset: int, leader_log_start_offset: int, leader_log_end_offset: int
) -> TruncationDecision:
    """Kafka's ``handleOutOfRangeError``: ahead of the leader's end, cut back to it; behind
    its log start (retention overtook the follower), restart empty at the leader's start."""
    if follower_log_end_offset > leader_log_end_offset:
        return TruncationDecision(leader_log_end_offset, True)
    if follower_log_end_offset < leader_log_start_offset:
        return TruncationDecision(None, True, start_at=leader_log_start_offset)
    return TruncationDecision(None, True)


class FollowerState:
    """One partition on a follower: truncate first, then fetch (module docstring)."""

    def __init__(self, *, replica_id: int, broker_epoch: int = -1) -> None:
        self.replica_id = replica_id
        self.broker_epoch = broker_epoch
        self.leader_id: int | None = None
        self.leader_epoch = UNDEFINED_EPOCH
        self.phase = FollowerPhase.TRUNCATING
        self.high_watermark = 0

    def become_follower(self, leader_id: int, leader_epoch: int) -> bool:
        """Follow ``leader_id`` in ``leader_epoch``; truncation must run again. Ignores a
        leader epoch older than the one already followed (stale metadata)."""
        if leader_epoch < self.leader_epoch:
            return False
        if leader_epoch == self.leader_epoch and leader_id == self.leader_id:
            return False
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.phase = FollowerPhase.TRUNCATING
        return True

    def epoch_request(self, entries: list[EpochEntry]) -> EpochRequest | None:
        """The OffsetsForLeaderEpoch to send, or None when there is nothing to check (no
        local epoch: the log holds no records) and fetching may start."""
        if self.phase is not FollowerPhase.TRUNCATING:
            return None
        if not entries:
            self.phase = FollowerPhase.FETCHING
            return None
        return EpochRequest(self.replica_id, self.leader_epoch, entries[-1].epoch)

    def on_epoch_response(
        self,
        error: str,
        epoch: int,
        end_offset: int,
        entries: list[EpochEntry],
        log_end_offset: int,
        leader_log_start_offset: int = 0,
    ) -> TruncationDecision | None:
        """Decide the truncation; None on an error (stale or unknown epoch: wait for new
        metadata, then retry). Fetching starts once a decision is ``completed``."""
        if error != errors.NONE or self.phase is not FollowerPhase.TRUNCATING:
            return None
        decision = truncation_decision(
            entries, log_end_offset, epoch, end_offset, leader_log_start_offset
        )
        if decision.completed:
            self.phase = FollowerPhase.FETCHING
        return decision

    def fetch_request(self, log_end_offset: int) -> FetchRequest | None:
        """The next replica fetch, from the log end offset; None while truncating."""
        if self.phase is not FollowerPhase.FETCHING or self.leader_id is None:
            return None
        return FetchRequest(self.replica_id, log_end_offset, self.leader_epoch, self.broker_epoch)

    def on_fetch_response(self, leader_high_watermark: int, log_end_offset: int) -> int:
        """After appending the fetched batches: the follower's HW is the leader's, capped
        at its own log end offset (Kafka's follower HW; it follows the leader's, which after
        a leader change may be lower). Returns it."""
        self.high_watermark = min(leader_high_watermark, log_end_offset)
        return self.high_watermark

    def on_fetch_error(self, error: str) -> None:
        """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER: stop and wait
        for metadata; the next ``become_follower`` restarts with truncation."""
        if error in (
            errors.FENCED_LEADER_EPOCH,
            errors.UNKNOWN_LEADER_EPOCH,
            errors.NOT_LEADER_OR_FOLLOWER,
        ):
            self.phase = FollowerPhase.TRUNCATING
