"""Errors of the internal cluster routes, with Kafka's error codes."""

from __future__ import annotations

from backend.core.exceptions import ApplicationError, Conflict, NotFound


class StaleBrokerEpoch(Conflict):
    """The broker spoke with an epoch other than its current registration's: register
    again (KIP-903)."""

    error_code = "STALE_BROKER_EPOCH"


class UnknownBroker(NotFound):
    error_code = "BROKER_NOT_AVAILABLE"


class UnknownTopicOrPartition(NotFound):
    error_code = "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidReplicaAssignment(ApplicationError):
    error_code = "INVALID_REPLICA_ASSIGNMENT"
