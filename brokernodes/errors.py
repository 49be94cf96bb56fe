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


class UnsupportedCompressionError(SluiceError):
    """A compression codec id that Sluice does not know."""

    error_code = "UNSUPPORTED_COMPRESSION_TYPE"


class OffsetOutOfRangeError(SluiceError):
    """A read or lookup outside [log start offset, log end offset]."""

    error_code = "OFFSET_OUT_OF_RANGE"


class KafkaStorageError(SluiceError):
    """The log directory or a file in it cannot be used."""

    error_code = "KAFKA_STORAGE_ERROR"
