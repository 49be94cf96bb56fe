"""Consumer-group errors, named as Kafka's group coordinator names them.

All are :class:`~brokernodes.errors.SluiceError` subclasses so the server maps them to the
usual ``{"error_code", "message"}`` body without knowing where they came from.
"""

from __future__ import annotations

from brokernodes.errors import SluiceError


class UnknownMemberIdError(SluiceError):
    """The member id is not (or no longer) in the group: fenced, expired or never joined."""

    error_code = "UNKNOWN_MEMBER_ID"


class FencedMemberEpochError(SluiceError):
    """A heartbeat with a member epoch the coordinator cannot accept; the member must rejoin
    with epoch 0 after giving up all its partitions (KIP-848)."""

    error_code = "FENCED_MEMBER_EPOCH"


class StaleMemberEpochError(SluiceError):
    """An offset commit from a member whose epoch is not its current one (a zombie)."""

    error_code = "STALE_MEMBER_EPOCH"


class GroupIdNotFoundError(SluiceError):
    """No such consumer group."""

    error_code = "GROUP_ID_NOT_FOUND"


class NonEmptyGroupError(SluiceError):
    """The operation (offset reset, delete) needs an inactive group, and this one has members."""

    error_code = "NON_EMPTY_GROUP"


class InvalidGroupRequestError(SluiceError):
    """A malformed group request: bad epoch, negative offset, unknown assignor or reset spec."""

    error_code = "INVALID_REQUEST"


class UnsupportedAssignorError(SluiceError):
    """An assignor name the coordinator does not have."""

    error_code = "UNSUPPORTED_ASSIGNOR"


class GroupSubscribedToTopicError(SluiceError):
    """Offsets of a topic the group's members subscribe to cannot be deleted (OffsetDelete)."""

    error_code = "GROUP_SUBSCRIBED_TO_TOPIC"
