"""Configs in Kafka's terms for DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
Pure: no I/O.

A topic's configs come from the control plane as its overrides and every effective value;
an override's source is DYNAMIC_TOPIC_CONFIG, anything else DEFAULT_CONFIG. Broker configs
are the answering broker's own settings, read-only (tenants of a managed service do not
change brokers) with source STATIC_BROKER_CONFIG.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from brokernodes.storage.config import UNSUPPORTED_TOPIC_CONFIGS, LogConfig

# Kafka's ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigs ConfigSource
SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigs ConfigType (v3+)
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7

# IncrementalAlterConfigs ConfigOperation
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy"})

_TYPES: Mapping[str, int] = {
    "cleanup.policy": TYPE_LIST,
    "message.timestamp.type": TYPE_STRING,
    "compression.type": TYPE_STRING,
    "unclean.leader.election.enable": TYPE_BOOLEAN,
    "preallocate": TYPE_BOOLEAN,
    "min.cleanable.dirty.ratio": TYPE_DOUBLE,
    "segment.bytes": TYPE_INT,
    "segment.index.bytes": TYPE_INT,
    "index.interval.bytes": TYPE_INT,
    "max.message.bytes": TYPE_INT,
    "min.insync.replicas": TYPE_INT,
}

_DOCS: Mapping[str, str] = {
    "cleanup.policy": "delete (drop old segments), compact (keep the latest value per key), "
    "or both",
    "retention.ms": "how long a segment is kept before it may be deleted (-1: no limit)",
    "retention.bytes": "the most bytes a partition keeps before old segments go (-1: no limit)",
    "segment.bytes": "the size at which a partition's active segment rolls",
    "segment.ms": "the age at which a partition's active segment rolls",
    "max.message.bytes": "the largest record batch the topic accepts",
    "min.insync.replicas": "in-sync replicas an acks=all write needs",
    "message.timestamp.type": "CreateTime (the producer's) or LogAppendTime (the leader's "
    "append time, stamped on every batch)",
    "compression.type": "producer (stored as sent), uncompressed, gzip, snappy, lz4 or zstd "
    "(the leader recompresses batches sent in another codec)",
    "message.timestamp.before.max.ms": "how far before the broker's clock a CreateTime "
    "timestamp may lie",
    "message.timestamp.after.max.ms": "how far after the broker's clock a CreateTime "
    "timestamp may lie",
}


TOPIC_DEFAULTS = {
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
}


def effective_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config's value: the overrides over the log's defaults (what the control
    plane answers; used by a broker without one, from its metadata file's overrides)."""
    defaults = LogConfig()
    out = {f.name.replace("_", "."): str(getattr(defaults, f.name)) for f in fields(LogConfig)}
    for name in UNSUPPORTED_TOPIC_CONFIGS:  # kept by the broker's parser, refused by the
        out.pop(name, None)  # control plane: not listed
    out.update(TOPIC_DEFAULTS)
    out.update(overrides)
    return out


def config_type(name: str) -> int:
    """Kafka's ConfigType of a topic config (most are LONGs)."""
    return _TYPES.get(name, TYPE_LONG)


def wanted(all_names: Iterable[str], keys: list[str] | None) -> list[str]:
    """The configs a DescribeConfigs resource asks for (``None`` or empty: all), in order."""
    names = sorted(all_names)
    if not keys:
        return names
    known = set(names)
    return [k for k in dict.fromkeys(keys) if k in known]


def topic_entries(
    effective: Mapping[str, str],
    overrides: Mapping[str, str],
    keys: list[str] | None,
    *,
    synonyms: bool,
    documentation: bool,
) -> list[dict]:
    """DescribeConfigs entries of one topic (``configs`` of a result)."""
    out = []
    for name in wanted(effective, keys):
        value = effective[name]
        overridden = name in overrides
        entry: dict[str, Any] = {
            "name": name,
            "value": value,
            "read_only": False,
            "config_source": SOURCE_TOPIC if overridden else SOURCE_DEFAULT,
            "is_sensitive": False,
            "config_type": config_type(name),
            "documentation": _DOCS.get(name) if documentation else None,
            "synonyms": [],
        }
        if synonyms:  # the override, or the default (the default beneath an override is
            # not known here)
            entry["synonyms"].append(
                {"name": name, "value": value, "source": entry["config_source"]}
            )
        out.append(entry)
    return out


def created_topic_configs(effective: Mapping[str, str], overrides: Mapping[str, str]) -> list:
    """CreateTopics v5+ ``configs`` of a created topic."""
    return [
        {
            "name": name,
            "value": effective[name],
            "read_only": False,
            "config_source": SOURCE_TOPIC if name in overrides else SOURCE_DEFAULT,
            "is_sensitive": False,
        }
        for name in sorted(effective)
    ]


def broker_entries(settings: Mapping[str, str], keys: list[str] | None) -> list[dict]:
    """DescribeConfigs entries of a broker: its own settings, read-only."""
    return [
        {
            "name": name,
            "value": settings[name],
            "read_only": True,
            "config_source": SOURCE_STATIC_BROKER,
            "is_sensitive": False,
            "config_type": TYPE_STRING if not settings[name].lstrip("-").isdigit() else TYPE_INT,
            "documentation": None,
            "synonyms": [],
        }
        for name in wanted(settings, keys)
    ]


class ConfigOpError(ValueError):
    """An IncrementalAlterConfigs operation Sluice cannot apply (the message says why)."""


def incremental_changes(
    effective: Mapping[str, str], ops: Iterable[Mapping[str, Any]]
) -> dict[str, str | None]:
    """IncrementalAlterConfigs operations as the control plane's PATCH ``configs``: a value
    sets an override, ``None`` removes it. APPEND and SUBTRACT apply to list configs
    (``cleanup.policy``) starting from the effective value."""
    changes: dict[str, str | None] = {}
    for op in ops:
        name, code, value = op["name"], op["config_operation"], op["value"]
        if name in changes:
            raise ConfigOpError(f"{name} is changed twice in one request")
        if code == OP_SET:
            if value is None:
                raise ConfigOpError(f"SET {name} needs a value")
            changes[name] = value
        elif code == OP_DELETE:
            changes[name] = None
        elif code in (OP_APPEND, OP_SUBTRACT):
            if name not in LIST_CONFIGS:
                raise ConfigOpError(
                    f"APPEND and SUBTRACT apply to list configs ({', '.join(sorted(LIST_CONFIGS))})"
                    f"; {name} is not one"
                )
            current = [v for v in (effective.get(name) or "").split(",") if v]
            items = [v.strip() for v in (value or "").split(",") if v.strip()]
            if code == OP_APPEND:
                merged = current + [v for v in items if v not in current]
            else:
                merged = [v for v in current if v not in items]
            if not merged:
                raise ConfigOpError(f"{name} cannot be empty")
            changes[name] = ",".join(merged)
        else:
            raise ConfigOpError(f"unknown config operation {code}")
    return changes


def replace_changes(
    overrides: Mapping[str, str], configs: Iterable[Mapping[str, Any]]
) -> dict[str, str | None]:
    """AlterConfigs (not incremental) replaces a topic's overrides with the request's: the
    request's values, and ``None`` (back to the default) for every override it leaves out."""
    new = {c["name"]: c["value"] for c in configs if c["value"] is not None}
    changes: dict[str, str | None] = {name: None for name in overrides if name not in new}
    changes.update(new)
    return changes
