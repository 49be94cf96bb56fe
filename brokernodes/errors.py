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
