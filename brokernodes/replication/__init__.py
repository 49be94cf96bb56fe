"""Replication state machines (pure): leader, follower and controller decisions.

No asyncio, sockets or clocks: the broker's replica manager and fetcher drive ``LeaderState``
and ``FollowerState`` with ``now_ms`` and log offsets, and the control plane's controller
applies the functions of ``controller``. See docs/replication.md.
"""

from brokernodes.replication.controller import (
    BrokerView,
    Election,
    PartitionRegistration,
    alter_partition,
    elect_leader,
    fence_broker,
)
from brokernodes.replication.follower import FollowerPhase, FollowerState, TruncationDecision
from brokernodes.replication.leader import (
    AckStatus,
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderState,
)

__all__ = [
    "AckStatus",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "BrokerView",
    "Election",
    "FollowerPhase",
    "FollowerState",
    "LeaderState",
    "PartitionRegistration",
    "TruncationDecision",
    "alter_partition",
    "elect_leader",
    "fence_broker",
]
