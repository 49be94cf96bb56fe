"""Errors the data plane raises, each with a stable Kafka-style ``error_code``.

Every layer (records, storage, server) raises these, so the server can map any of them to a
JSON body ``{"error_code": ..., "message": ...}`` without knowing where it came from.
"""

from __future__ import annotations


class SluiceError(Exception):
    """Base of all data-plane errors; ``error_code`` is stable and machine-readable."""

    error_code = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.error_code}: {self.message}"


class CorruptRecordError(SluiceError):
    """Bytes that are not a valid RecordBatch v2: bad CRC, bad magic, torn length."""

    error_code = "CORRUPT_MESSAGE"


class InvalidRecordError(SluiceError):
    """A well-formed batch whose contents break a rule (e.g. offsets or counts disagree)."""

    error_code = "INVALID_RECORD"


class InvalidTimestampError(SluiceError):
    """A record timestamp outside message.timestamp.before.max.ms / after.max.ms (KIP-937)."""

    error_code = "INVALID_TIMESTAMP"


class MessageTooLargeError(SluiceError):
    """A batch larger than the topic's ``max.message.bytes``."""

    error_code = "MESSAGE_TOO_LARGE"


class UnsupportedCompressionError(CorruptRecordError):
    """A compression codec id that Sluice does not know (a kind of corrupt batch, so every
    place that cuts or refuses corrupt batches treats it alike)."""

    error_code = "UNSUPPORTED_COMPRESSION_TYPE"


class OffsetOutOfRangeError(SluiceError):
    """A read or lookup outside [log start offset, log end offset]."""

    error_code = "OFFSET_OUT_OF_RANGE"


class KafkaStorageError(SluiceError):
    """The log directory or a file in it cannot be used."""

    error_code = "KAFKA_STORAGE_ERROR"


class OutOfOrderSequenceError(SluiceError):
    """An idempotent batch whose base sequence does not follow the producer's last one."""

    error_code = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(SluiceError):
    """A produce with a producer epoch older than the one the partition has seen.

    What Kafka (2.7+) answers a produce from a fenced, older epoch; the client aborts and
    retries with its current epoch, or gives up if it has itself been fenced.
    """

    error_code = "INVALID_PRODUCER_EPOCH"


class ProducerFencedError(SluiceError):
    """A newer producer with the same id (transactional id) has taken over: stop for good.

    Kafka raises it from the producer id / transaction coordinator (InitProducerId, EndTxn),
    not from a partition's produce path, which answers ``INVALID_PRODUCER_EPOCH``.
    """

    error_code = "PRODUCER_FENCED"


class UnknownProducerIdError(SluiceError):
    """The broker holds no state for this producer id where it needs some.

    Kafka brokers before 2.5 (KIP-360) raised it on produce when a producer without state sent
    a non-zero sequence; current Kafka accepts that batch, and so does Sluice's partition
    producer state. Kept for the producer id allocator and for clients that expect it.
    """

    error_code = "UNKNOWN_PRODUCER_ID"


# --- the broker's request errors (server) ---------------------------------------------------


class InvalidRequestError(SluiceError):
    """A malformed request: bad JSON, a missing or ill-typed field, bad base64, bad query."""

    error_code = "INVALID_REQUEST"


class UnauthenticatedError(SluiceError):
    """No API key, or one the broker does not know."""

    error_code = "UNAUTHENTICATED"


class TopicAuthorizationFailedError(SluiceError):
    """The principal may not do this to the topic (ACLs)."""

    error_code = "TOPIC_AUTHORIZATION_FAILED"


class UnknownTopicOrPartitionError(SluiceError):
    """A topic or partition that the metadata does not have."""

    error_code = "UNKNOWN_TOPIC_OR_PARTITION"


class UnknownClusterError(SluiceError):
    """A ``{cluster}`` in the path that is not this broker's cluster id."""

    error_code = "UNKNOWN_CLUSTER"


class NotFoundError(SluiceError):
    """No such route."""

    error_code = "NOT_FOUND"


class MethodNotAllowedError(SluiceError):
    """The route exists, the method does not."""

    error_code = "METHOD_NOT_ALLOWED"


class NotLeaderOrFollowerError(SluiceError):
    """This broker does not lead the partition; ``details`` names the leader when known."""

    error_code = "NOT_LEADER_OR_FOLLOWER"

    def __init__(
        self, message: str, *, leader_id: int | None = None, leader_url: str | None = None
    ) -> None:
        super().__init__(message)
        self.details: dict[str, object] = {}
        if leader_id is not None:
            self.details["leader_id"] = leader_id
        if leader_url is not None:
            self.details["leader_url"] = leader_url


class NotEnoughReplicasError(SluiceError):
    """Fewer in-sync replicas than ``min.insync.replicas`` for an acks=all produce."""

    error_code = "NOT_ENOUGH_REPLICAS"


class RequestTooLargeError(SluiceError):
    """A request body over the broker's ``max_request_bytes``."""

    error_code = "REQUEST_TOO_LARGE"


class RequestTimedOutError(SluiceError):
    """A client that did not send its whole body in time."""

    error_code = "REQUEST_TIMED_OUT"


# --- client side: what the SDK raises --------------------------------------------------------


class BrokerError(SluiceError):
    """An error answer from a broker: its JSON body ``{"error_code", "message", ...}``.

    ``error_code`` is the broker's code (an instance attribute here), ``status`` the HTTP
    status, ``url`` the request's URL, ``details`` any extra body fields (e.g. ``leader_url``
    with NOT_LEADER_OR_FOLLOWER, ``log_start_offset`` with OFFSET_OUT_OF_RANGE).
    """

    # Codes a client retries (after a metadata refresh where it helps), as Kafka's
    # RetriableException subclasses are.
    RETRIABLE_CODES = frozenset(
        {
            "NOT_LEADER_OR_FOLLOWER",
            "NOT_ENOUGH_REPLICAS",
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            "REQUEST_TIMED_OUT",
            "KAFKA_STORAGE_ERROR",
            "LEADER_NOT_AVAILABLE",
            "THROTTLING_QUOTA_EXCEEDED",
            "CONCURRENT_TRANSACTIONS",
        }
    )

    def __init__(
        self,
        error_code: str,
        message: str,
        *,
        status: int | None = None,
        url: str | None = None,
        details: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.status = status
        self.url = url
        self.details = dict(details or {})

    @property
    def retriable(self) -> bool:
        return self.error_code in self.RETRIABLE_CODES or (
            self.status is not None and self.status >= 500
        )

    @classmethod
    def from_response(cls, status: int, body: bytes, url: str | None = None) -> BrokerError:
        """Build from an HTTP error answer; a body that is not the documented JSON still
        gives a readable error."""
        import json

        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("sluice_code"), str):
            # a Confluent route: Confluent's integer beside Sluice's code
            doc = {**doc, "error_code": doc["sluice_code"]}
            del doc["sluice_code"]
        if isinstance(doc, dict) and isinstance(doc.get("error_code"), str):
            details = {k: v for k, v in doc.items() if k not in ("error_code", "message")}
            return cls(
                doc["error_code"],
                str(doc.get("message") or doc["error_code"]),
                status=status,
                url=url,
                details=details,
            )
        text = body[:200].decode("utf-8", "replace").strip() if body else ""
        code = _STATUS_CODES.get(status, "UNKNOWN_SERVER_ERROR")
        message = f"HTTP {status} from {url or 'the broker'}" + (f": {text}" if text else "")
        return cls(code, message, status=status, url=url)


_STATUS_CODES = {
    400: "INVALID_REQUEST",
    401: "UNAUTHENTICATED",
    403: "TOPIC_AUTHORIZATION_FAILED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "REQUEST_TIMED_OUT",
    413: "REQUEST_TOO_LARGE",
    416: "OFFSET_OUT_OF_RANGE",
    421: "NOT_LEADER_OR_FOLLOWER",
}


class BrokerConnectionError(SluiceError):
    """The client could not reach a broker, or the connection broke mid-request (retriable)."""

    error_code = "NETWORK_EXCEPTION"
    retriable = True

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class ClientTimeoutError(SluiceError):
    """A request, a delivery or a blocking call did not finish within its time limit."""

    error_code = "REQUEST_TIMED_OUT"
    retriable = True


class BufferFullError(SluiceError):
    """The producer holds ``buffer_memory`` bytes of unsent records; wait or flush first."""

    error_code = "BUFFER_EXHAUSTED"


class ClientClosedError(SluiceError):
    """The producer or consumer was closed."""

    error_code = "CLIENT_CLOSED"


UnknownTopicError = UnknownTopicOrPartitionError  # what the SDK raises for a topic not in metadata
