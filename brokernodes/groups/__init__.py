"""The consumer-group coordinator's pure core (KIP-848 style): assignors, the group state
machine, offset commit rules and the ``__consumer_offsets`` format, offset reset planning and
lag. No I/O and no clock: the broker's asyncio shell feeds requests and ``now_ms`` in and
appends the returned records to ``__consumer_offsets``. See docs/consumer-groups.md.
"""

from brokernodes.groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    get_assignor,
    range_assign,
    round_robin_assign,
    uniform_assign,
)
from brokernodes.groups.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidGroupRequestError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnsupportedAssignorError,
)
from brokernodes.groups.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    GroupState,
    HeartbeatResponse,
    Member,
    MemberState,
)
from brokernodes.groups.lag import PartitionLag, group_lag, offset_lag, time_lag_ms, total_lag
from brokernodes.groups.offsets import OffsetStore, delete_group, validate_commit
from brokernodes.groups.records import (
    CoordinatorState,
    group_records,
    group_tombstones,
    load_records,
    record_diff,
)
from brokernodes.groups.reset import (
    PartitionOffsets,
    ResetEntry,
    ResetPlan,
    ResetSpec,
    ResetStrategy,
    parse_duration,
    plan_reset,
)
from brokernodes.groups.types import (
    MemberSubscription,
    OffsetAndMetadata,
    OffsetKey,
    TopicPartition,
)

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "CoordinatorState",
    "FencedMemberEpochError",
    "GroupIdNotFoundError",
    "GroupState",
    "GroupSubscribedToTopicError",
    "HeartbeatResponse",
    "InvalidGroupRequestError",
    "Member",
    "MemberState",
    "MemberSubscription",
    "NonEmptyGroupError",
    "OffsetAndMetadata",
    "OffsetKey",
    "OffsetStore",
    "PartitionLag",
    "PartitionOffsets",
    "ResetEntry",
    "ResetPlan",
    "ResetSpec",
    "ResetStrategy",
    "StaleMemberEpochError",
    "TopicPartition",
    "UnknownMemberIdError",
    "UnsupportedAssignorError",
    "delete_group",
    "get_assignor",
    "group_lag",
    "group_records",
    "group_tombstones",
    "load_records",
    "offset_lag",
    "parse_duration",
    "plan_reset",
    "range_assign",
    "record_diff",
    "round_robin_assign",
    "time_lag_ms",
    "total_lag",
    "uniform_assign",
    "validate_commit",
]
