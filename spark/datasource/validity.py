"""What the analytics accept from a log: batches they can decode, timestamps they can hold.

A tenant can put bytes in a log that a job cannot read: a batch whose frame and CRC-32C are
intact but whose records are garbage (the CRC covers whatever the producer sent), or records
stamped at the int64 limits, which neither Python's ``datetime`` nor Spark's microsecond
timestamps can hold. Such a batch is one tenant's problem; failing the read would fail the
cluster-wide job for every tenant. So the reader skips it and says so: an
``UnreadableBatch`` names where it was and why, and the jobs count them per tenant.
"""

from __future__ import annotations

from dataclasses import dataclass

# The epoch-ms range both Python's datetime and Spark's TimestampType hold: years 1-9999.
MIN_TIMESTAMP_MS = -62_135_596_800_000
MAX_TIMESTAMP_MS = 253_402_300_799_999

CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
INVALID_TIMESTAMP = "INVALID_TIMESTAMP"
REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class UnreadableBatch:
    """A batch a read skipped: its offsets ``[base_offset, last_offset]`` and why
    (``CORRUPT_MESSAGE: ...`` or ``INVALID_TIMESTAMP: ...``)."""

    base_offset: int
    last_offset: int
    reason: str


def timestamp_ok(ms: int) -> bool:
    return MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS


def clamp_timestamp(ms: int) -> int:
    """``ms`` within the range a report can hold (a segment's largest timestamp at the int64
    limit becomes year 9999: retention by time never reaches it, as on the broker)."""
    return min(max(ms, MIN_TIMESTAMP_MS), MAX_TIMESTAMP_MS)


def reason(code: str, detail: object) -> str:
    return f"{code}: {detail}"[:REASON_CHARS]
