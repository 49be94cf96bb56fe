"""Error codes -> HTTP statuses and JSON error bodies (pure; the HTTP layer sends them)."""

from __future__ import annotations

from brokernodes.errors import SluiceError

STATUS_BY_CODE: dict[str, int] = {
    "INVALID_REQUEST": 400,
    "CORRUPT_MESSAGE": 400,
    "INVALID_RECORD": 400,
    "INVALID_TIMESTAMP": 400,
    "UNSUPPORTED_COMPRESSION_TYPE": 400,
    "MESSAGE_TOO_LARGE": 413,
    "REQUEST_TOO_LARGE": 413,
    "UNAUTHENTICATED": 401,
    "TOPIC_AUTHORIZATION_FAILED": 403,
    "GROUP_AUTHORIZATION_FAILED": 403,
    "CLUSTER_AUTHORIZATION_FAILED": 403,
    "QUOTA_EXCEEDED": 403,  # storage or connections: retrying does not help until usage drops
    # per-tenant caps on held objects (tenant_caps): retry once some are closed
    "TOO_MANY_CONSUMER_INSTANCES": 429,
    "TOO_MANY_STREAMS": 429,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "UNKNOWN_CLUSTER": 404,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "OFFSET_OUT_OF_RANGE": 416,
    "NOT_LEADER_OR_FOLLOWER": 421,
    # a call forwarded to a partition's leader (docs/data-plane-api.md, "One front door")
    "LEADER_NOT_AVAILABLE": 503,
    "NETWORK_EXCEPTION": 503,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 409,
    "INVALID_PRODUCER_EPOCH": 409,
    "PRODUCER_FENCED": 409,
    "UNKNOWN_PRODUCER_ID": 409,
    "NOT_ENOUGH_REPLICAS": 503,
    "REQUEST_TIMED_OUT": 408,
    "KAFKA_STORAGE_ERROR": 500,
    "UNKNOWN_SERVER_ERROR": 500,
    # consumer groups (docs/consumer-groups.md)
    "NOT_COORDINATOR": 421,
    "COORDINATOR_LOAD_IN_PROGRESS": 503,
    "COORDINATOR_NOT_AVAILABLE": 503,
    "UNKNOWN_MEMBER_ID": 409,
    "FENCED_MEMBER_EPOCH": 409,
    "STALE_MEMBER_EPOCH": 409,
    "NON_EMPTY_GROUP": 409,
    "GROUP_ID_NOT_FOUND": 404,
    "UNSUPPORTED_ASSIGNOR": 400,
    "UNKNOWN_CONSUMER_INSTANCE": 404,
    "INVALID_CURSOR": 400,
    "CONSUMER_INSTANCE_EXISTS": 409,
    # transactions (docs/transactions.md, "Sluice's API")
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 403,
    "INVALID_TXN_STATE": 409,
    "INVALID_PRODUCER_ID_MAPPING": 409,
    "CONCURRENT_TRANSACTIONS": 409,  # retriable: the previous transaction is completing
    "INVALID_TRANSACTION_TIMEOUT": 400,
    "INVALID_TOPIC_EXCEPTION": 400,
    # media type negotiation (protocol.confluent)
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "NOT_ACCEPTABLE": 406,
    "CONSUMER_FORMAT_MISMATCH": 406,
}


def status_for(error_code: str) -> int:
    """The HTTP status for an error code (500 for a code this table does not know)."""
    return STATUS_BY_CODE.get(error_code, 500)


def error_body(error: SluiceError) -> dict[str, object]:
    """``{"error_code", "message", ...details}`` for any ``SluiceError``."""
    body: dict[str, object] = {"error_code": error.error_code, "message": error.message}
    details = getattr(error, "details", None)
    if details:
        body.update(details)
    return body


def batch_outcomes(batches: list[tuple[int, int, bool]]) -> list[dict]:
    """A several-batch produce's per-batch answer, in request order: each batch's own
    offsets, and whether it was already in the log (a retry answered from the producer
    state). A client acknowledges each batch from its own entry."""
    return [
        {"base_offset": base, "last_offset": last, "duplicate": dup} for base, last, dup in batches
    ]
