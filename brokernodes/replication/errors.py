"""Error codes the replication state machines answer with (Kafka's names).

The state machines return these codes in their results rather than raising, so the broker
and the controller decide how to answer; ``NotEnoughReplicasAfterAppendError`` is the one
exception type a produce path needs that ``brokernodes.errors`` does not define yet.
"""

from __future__ import annotations

from brokernodes.errors import SluiceError

NONE = "NONE"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
INVALID_REQUEST = "INVALID_REQUEST"
OPERATION_NOT_ATTEMPTED = "OPERATION_NOT_ATTEMPTED"


class NotEnoughReplicasAfterAppendError(SluiceError):
    """The append was written, but the ISR fell below ``min.insync.replicas`` while an
    acks=all produce waited: the records may or may not be committed (retriable)."""

    error_code = NOT_ENOUGH_REPLICAS_AFTER_APPEND
