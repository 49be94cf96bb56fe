"""The replication errors the broker answers with (Kafka's names and codes).

``NOT_ENOUGH_REPLICAS`` lives in ``brokernodes.errors`` and ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``
in ``brokernodes.replication.errors``; these are the leader-epoch fencing answers a replica
(or an SDK with stale metadata) gets. ``error_for`` turns a state machine's code into one.
"""

from __future__ import annotations

from brokernodes.errors import NotEnoughReplicasError, NotLeaderOrFollowerError, SluiceError
from brokernodes.replication import errors as codes
from brokernodes.replication.errors import NotEnoughReplicasAfterAppendError


class FencedLeaderEpochError(SluiceError):
    """The requester's leader epoch is older than this leader's: refresh metadata (KIP-320)."""

    error_code = codes.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(SluiceError):
    """The requester knows a newer leader epoch than this broker: this broker's metadata is
    behind (it may be a deposed leader); retry after a short wait."""

    error_code = codes.UNKNOWN_LEADER_EPOCH


def error_for(code: str, message: str) -> SluiceError:
    """The exception for a replication error code (never called with NONE)."""
    cls = {
        codes.FENCED_LEADER_EPOCH: FencedLeaderEpochError,
        codes.UNKNOWN_LEADER_EPOCH: UnknownLeaderEpochError,
        codes.NOT_ENOUGH_REPLICAS: NotEnoughReplicasError,
        codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND: NotEnoughReplicasAfterAppendError,
    }.get(code)
    if cls is not None:
        return cls(message)
    if code == codes.NOT_LEADER_OR_FOLLOWER:
        return NotLeaderOrFollowerError(message)
    err = SluiceError(message)
    err.error_code = code
    return err
