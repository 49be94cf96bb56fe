"""What each accepted topic config is, for editors: its kind, unit, bounds, allowed values,
default and a one-line description. Pure: no database.

One registry, so the console renders a typed editor per config (a choice, a switch, a
duration or a size in human units) from the control plane instead of keeping its own list.
Bounds and choices are the ones ``normalise_configs`` enforces, defaults the ones
``effective_configs`` answers; a test keeps the three equal. Numbers are strings, as Kafka's
config values are (a long does not fit a JSON reader's double).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.topics.configs import _INT_RANGES, KNOWN_CONFIGS, MINUS_ONE_OK, effective_configs
from brokernodes.storage.config import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    MAX_LONG,
    TIMESTAMP_TYPES,
)

KINDS = ("enum", "boolean", "duration", "size", "count", "ratio")
NO_LIMIT = {"-1": "no limit"}
NEVER = {str(MAX_LONG): "never"}
UNBOUNDED = {str(MAX_LONG): "no limit"}


@dataclass(frozen=True)
class ConfigDefinition:
    name: str
    kind: str  # one of KINDS
    description: str
    unit: str | None = None  # ms, bytes, messages, replicas; None for enum/boolean/ratio
    choices: tuple[str, ...] = ()
    special: dict[str, str] = field(default_factory=dict)  # value -> its meaning
    minimum: str | None = None
    maximum: str | None = None


def _d(name: str, kind: str, description: str, **kw) -> ConfigDefinition:
    unit = {"duration": "ms", "size": "bytes"}.get(kind, kw.pop("unit", None))
    if name in _INT_RANGES:
        low, high = _INT_RANGES[name]
        kw.setdefault("minimum", str(low))
        kw.setdefault("maximum", str(high))
    if name in MINUS_ONE_OK:
        kw.setdefault("special", NO_LIMIT)
    return ConfigDefinition(name=name, kind=kind, description=description, unit=unit, **kw)


_DEFINITIONS = (
    _d(
        "cleanup.policy",
        "enum",
        "delete: retention drops old segments; compact: keep the latest record per key; "
        "both: compact, then drop by retention",
        choices=CLEANUP_POLICIES,
    ),
    _d(
        "compression.type",
        "enum",
        "producer: store batches as sent; a codec: the leader recompresses batches sent in "
        "another codec",
        choices=tuple(COMPRESSION_TYPES),
    ),
    _d(
        "delete.retention.ms",
        "duration",
        "how long the cleaner keeps a tombstone after it first kept it",
    ),
    _d(
        "flush.messages",
        "count",
        "fsync the log after this many messages (default: never by policy)",
        unit="messages",
        special=NEVER,
    ),
    _d(
        "flush.ms",
        "duration",
        "fsync the log when the last flush is this old (default: never by policy)",
        special=NEVER,
    ),
    _d("index.interval.bytes", "size", "bytes between two entries of the offset and time indexes"),
    _d(
        "max.compaction.lag.ms",
        "duration",
        "a dirty segment older than this is compacted whatever the dirty ratio",
        special=UNBOUNDED,
    ),
    _d("max.message.bytes", "size", "the largest record batch a produce may append"),
    _d(
        "message.timestamp.after.max.ms",
        "duration",
        "CreateTime: refuse a record timestamp further ahead of the broker's clock",
    ),
    _d(
        "message.timestamp.before.max.ms",
        "duration",
        "CreateTime: refuse a record timestamp further behind the broker's clock",
        special=UNBOUNDED,
    ),
    _d(
        "message.timestamp.type",
        "enum",
        "CreateTime: records keep the producer's timestamps; LogAppendTime: the leader "
        "stamps its append time",
        choices=TIMESTAMP_TYPES,
    ),
    _d(
        "min.cleanable.dirty.ratio",
        "ratio",
        "the cleaner compacts a log once its dirty share of bytes reaches this",
        minimum="0",
        maximum="1",
    ),
    _d(
        "min.compaction.lag.ms",
        "duration",
        "records younger than this are never compacted away",
    ),
    _d(
        "min.insync.replicas",
        "count",
        "in-sync replicas an acks=all produce needs; at most the replication factor",
        unit="replicas",
    ),
    _d(
        "retention.bytes",
        "size",
        "the oldest segments go while a partition is larger than this",
    ),
    _d("retention.ms", "duration", "segments whose newest record is older than this go"),
    _d("segment.bytes", "size", "the active segment rolls before it grows past this size"),
    _d(
        "segment.index.bytes",
        "size",
        "the most bytes a segment's index may hold; a full index rolls the segment",
    ),
    _d("segment.ms", "duration", "the active segment rolls when its first batch is this old"),
    _d(
        "unclean.leader.election.enable",
        "boolean",
        "let a replica outside the ISR lead when no in-sync one is left (loses data)",
    ),
)
DEFINITIONS: dict[str, ConfigDefinition] = {d.name: d for d in _DEFINITIONS}
assert set(DEFINITIONS) == KNOWN_CONFIGS, "every accepted config needs a definition"


def config_definitions(*, max_message_bytes: int | None = None) -> list[dict]:
    """Every accepted config's definition with its default, by name; ``max_message_bytes``
    caps ``max.message.bytes`` as the service does."""
    defaults = effective_configs({})
    out = []
    for name in sorted(DEFINITIONS):
        d = DEFINITIONS[name]
        maximum = d.maximum
        if name == "max.message.bytes" and max_message_bytes is not None:
            maximum = str(min(int(maximum or max_message_bytes), max_message_bytes))
        out.append(
            {
                "name": name,
                "kind": d.kind,
                "unit": d.unit,
                "description": d.description,
                "default": defaults[name],
                "choices": list(d.choices),
                "special": dict(d.special),
                "minimum": d.minimum,
                "maximum": maximum,
            }
        )
    return out
