"""Per-partition log settings (``LogConfig``) with Kafka's names and defaults.

``LogConfig.from_properties({"segment.bytes": "1048576", ...})`` accepts Kafka's dotted
topic-config names (the control plane stores those); attribute names use underscores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

from brokernodes.records.compression import Compression

MAX_LONG = 2**63 - 1
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
PRODUCER = "producer"
COMPRESSION_TYPES: Mapping[str, int | None] = MappingProxyType(
    {
        PRODUCER: None,  # batches are stored as the producer sent them
        "uncompressed": int(Compression.NONE),
        "gzip": int(Compression.GZIP),
        "snappy": int(Compression.SNAPPY),
        "lz4": int(Compression.LZ4),
        "zstd": int(Compression.ZSTD),
    }
)
"""Kafka's topic ``compression.type`` values and the codec id a leader stores batches in."""
_STRING_FIELDS = frozenset({"cleanup_policy", "message_timestamp_type", "compression_type"})

UNSUPPORTED_TOPIC_CONFIGS: Mapping[str, str] = MappingProxyType(
    {
        "file.delete.delay.ms": "segments leaving the log are deleted at once; fetches in "
        "flight keep their open files instead of a delay",
        "segment.jitter.ms": "segments roll at segment.ms exactly",
        "preallocate": "segment files grow as they are written",
        "message.downconversion.enable": "only RecordBatch v2 is served; there is nothing "
        "to down-convert",
        "message.format.version": "only RecordBatch v2 (magic 2) is stored",
        "message.timestamp.difference.max.ms": "use message.timestamp.before.max.ms and "
        "message.timestamp.after.max.ms (KIP-937)",
        "leader.replication.throttled.replicas": "replication is not throttled",
        "follower.replication.throttled.replicas": "replication is not throttled",
        "remote.storage.enable": "there is no tiered storage",
        "local.retention.ms": "there is no tiered storage",
        "local.retention.bytes": "there is no tiered storage",
    }
)
"""Kafka topic configs Sluice does not honour yet, with why: the control plane refuses them
(INVALID_CONFIG) rather than store a setting that would do nothing."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; immutable, so it can be shared between threads.

    Infinite values use Kafka's conventions: ``flush_messages`` / ``flush_ms`` = 2**63-1 (never
    flush by policy; the OS page cache and replication give durability, as in Kafka), and
    ``retention_ms`` / ``retention_bytes`` = -1 (unlimited).
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = MAX_LONG
    flush_ms: int = MAX_LONG
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = MAX_LONG
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60_000
    # KIP-937 (Kafka 3.6+ defaults): how far a record's timestamp may lie before / after the
    # broker's clock when produced (brokernodes.records.validator)
    message_timestamp_before_max_ms: int = MAX_LONG
    message_timestamp_after_max_ms: int = 60 * 60 * 1000
    # LogAppendTime: the leader stamps each batch with its append time (records.rewrite)
    message_timestamp_type: str = CREATE_TIME
    # producer: stored as sent; else the leader recompresses batches of another codec
    compression_type: str = PRODUCER

    def __post_init__(self) -> None:
        if self.cleanup_policy not in CLEANUP_POLICIES:
            # Kafka accepts the list in either order.
            parts = sorted(p.strip() for p in self.cleanup_policy.split(","))
            if parts == ["compact", "delete"]:
                object.__setattr__(self, "cleanup_policy", "compact,delete")
            else:
                raise ValueError(
                    f"cleanup.policy must be one of {', '.join(CLEANUP_POLICIES)}, "
                    f"not {self.cleanup_policy!r}"
                )
        # segment.bytes: Kafka's minimum is 14 bytes (one record overhead); anything smaller
        # than a batch header just means "one batch per segment".
        for name in ("segment_bytes", "segment_index_bytes", "max_message_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be positive")
        if self.segment_index_bytes < 8:
            raise ValueError("segment.index.bytes must hold at least one index entry (8 bytes)")
        for name in (
            "segment_ms",
            "flush_messages",
            "flush_ms",
            "index_interval_bytes",
            "message_timestamp_before_max_ms",
            "message_timestamp_after_max_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '.')} must not be negative")
        if self.flush_messages < 1:
            raise ValueError("flush.messages must be at least 1")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"message.timestamp.type must be one of {', '.join(TIMESTAMP_TYPES)}, "
                f"not {self.message_timestamp_type!r}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, "
                f"not {self.compression_type!r}"
            )

    @property
    def delete_enabled(self) -> bool:
        """True for ``delete`` and ``compact,delete``: time and size retention apply."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def roll_ms(self) -> int:
        """The age at which the active segment rolls: segment.ms, or max.compaction.lag.ms
        when lower on a compacted log (KIP-354: the active segment is never cleaned, so it
        must close in time for its records to be compacted within the lag)."""
        if self.max_compaction_lag_ms < self.segment_ms and self.compact_enabled:
            return self.max_compaction_lag_ms
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        """message.timestamp.type=LogAppendTime: batches carry the leader's append time."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compression_codec(self) -> int | None:
        """The codec id batches are stored in; None (``producer``) keeps the producer's."""
        return COMPRESSION_TYPES[self.compression_type]

    @property
    def rewrites_batches(self) -> bool:
        """Whether a leader's append may change a batch's bytes (timestamp or codec)."""
        return self.message_timestamp_type != CREATE_TIME or self.compression_type != PRODUCER

    def with_changes(self, **changes: object) -> LogConfig:
        return replace(self, **changes)

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> LogConfig:
        """Build from Kafka topic-config names (``segment.bytes``...); unknown names raise."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, raw in props.items():
            name = key.replace(".", "_")
            if name not in known:
                raise ValueError(f"unknown log config {key!r}")
            if name in _STRING_FIELDS:
                values[name] = str(raw)
            elif name == "min_cleanable_dirty_ratio":
                values[name] = float(raw)  # type: ignore[arg-type]
            else:
                values[name] = int(raw)  # type: ignore[call-overload]
        return cls(**values)  # type: ignore[arg-type]
