"""Validation of topic names and configs (pure: no database), with field-level errors.

Config names are Kafka's. The log settings are checked against ``LogConfig`` (the broker's
own parser, so the control plane never stores a config a broker would refuse); the topic-level
settings ``LogConfig`` does not hold (``min.insync.replicas``,
``unclean.leader.election.enable``) are checked here. Kafka configs the broker does not honour
yet (``UNSUPPORTED_TOPIC_CONFIGS``) are refused by name with the reason, never stored to do
nothing. Values are stored as strings, as Kafka's topic configs are. docs/topic-configs.md
lists every accepted config and what the broker does with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields as dc_fields
from typing import Any

from brokernodes.storage.config import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    MAX_LONG,
    TIMESTAMP_TYPES,
    UNSUPPORTED_TOPIC_CONFIGS,
    LogConfig,
)

TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_INT = 2**31 - 1

LOG_CONFIG_NAMES = frozenset(f.name.replace("_", ".") for f in dc_fields(LogConfig))
TOPIC_ONLY_NAMES = frozenset({"min.insync.replicas", "unclean.leader.election.enable"})
BOOLEAN_CONFIGS = frozenset({"unclean.leader.election.enable"})
STRING_CONFIGS: dict[str, tuple[str, ...]] = {
    "message.timestamp.type": TIMESTAMP_TYPES,
    "compression.type": tuple(COMPRESSION_TYPES),
}
KNOWN_CONFIGS = (LOG_CONFIG_NAMES | TOPIC_ONLY_NAMES) - frozenset(UNSUPPORTED_TOPIC_CONFIGS)
"""Every topic config the control plane accepts (docs/topic-configs.md says what each does)."""

# name -> (minimum, maximum, what it means); -1 is allowed where listed in MINUS_ONE_OK
_INT_RANGES: dict[str, tuple[int, int]] = {
    "retention.ms": (1, MAX_LONG),
    "retention.bytes": (1, MAX_LONG),
    "segment.bytes": (14, MAX_INT),
    "segment.ms": (1, MAX_LONG),
    "segment.index.bytes": (8, MAX_INT),
    "index.interval.bytes": (0, MAX_INT),
    "flush.messages": (1, MAX_LONG),
    "flush.ms": (0, MAX_LONG),
    "delete.retention.ms": (0, MAX_LONG),
    "min.compaction.lag.ms": (0, MAX_LONG),
    "max.compaction.lag.ms": (1, MAX_LONG),
    "max.message.bytes": (1, MAX_INT),
    "message.timestamp.before.max.ms": (0, MAX_LONG),
    "message.timestamp.after.max.ms": (0, MAX_LONG),
    "min.insync.replicas": (1, MAX_INT),
}
MINUS_ONE_OK = frozenset({"retention.ms", "retention.bytes"})


def topic_name_errors(name: Any, *, allow_internal: bool = False) -> list[str]:
    """Kafka's topic-name rules; tenants may not use the internal ``__`` prefix."""
    if not isinstance(name, str) or not TOPIC_NAME.match(name):
        return ["1-249 characters of ASCII letters, digits, '.', '_' and '-'"]
    if name in (".", ".."):
        return ["'.' and '..' are not topic names"]
    if name.startswith("__") and not allow_internal:
        return ["names starting with '__' are reserved for internal topics"]
    return []


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value.strip()):
        return int(value.strip())
    return None


def normalise_configs(
    configs: Mapping[str, Any],
    *,
    replication_factor: int,
    max_message_bytes: int | None = None,
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Check config overrides; returns (configs as strings, field errors keyed by name)."""
    out: dict[str, str] = {}
    errors: dict[str, list[str]] = {}

    def err(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    for name, value in configs.items():
        if name in UNSUPPORTED_TOPIC_CONFIGS:
            err(
                name,
                f"not supported yet: {UNSUPPORTED_TOPIC_CONFIGS[name]}; remove this config",
            )
            continue
        if name not in KNOWN_CONFIGS:
            err(name, f"unknown topic config; known: {', '.join(sorted(KNOWN_CONFIGS))}")
            continue
        if isinstance(value, dict | list) or value is None:
            err(name, "must be a string or a number")
            continue
        if name == "cleanup.policy":
            parts = sorted(p.strip() for p in str(value).split(","))
            policy = ",".join(parts)
            if policy not in CLEANUP_POLICIES:
                err(name, f"must be one of {', '.join(CLEANUP_POLICIES)}")
            else:
                out[name] = policy
        elif name in BOOLEAN_CONFIGS:
            flag = str(value).strip().lower()
            if flag not in ("true", "false"):
                err(name, "must be true or false")
            else:
                out[name] = flag
        elif name in STRING_CONFIGS:
            choices = STRING_CONFIGS[name]
            if value not in choices:
                err(name, f"must be one of {', '.join(choices)}")
            else:
                out[name] = str(value)
        elif name == "min.cleanable.dirty.ratio":
            try:
                ratio = float(value)
            except (TypeError, ValueError):
                ratio = -1.0
            if isinstance(value, bool) or not 0.0 <= ratio <= 1.0:
                err(name, "must be a number between 0 and 1")
            else:
                out[name] = str(ratio)
        else:
            number = _as_int(value)
            low, high = _INT_RANGES[name]
            if number is None:
                err(name, "must be an integer")
            elif number == -1 and name in MINUS_ONE_OK:
                out[name] = "-1"
            elif not low <= number <= high:
                extra = " or -1 (unlimited)" if name in MINUS_ONE_OK else ""
                err(name, f"must be between {low} and {high}{extra}")
            else:
                out[name] = str(number)

    mir = _as_int(out.get("min.insync.replicas"))
    if mir is not None and mir > replication_factor:
        err(
            "min.insync.replicas",
            f"must be at most the replication factor ({replication_factor})",
        )
    mmb = _as_int(out.get("max.message.bytes"))
    if mmb is not None and max_message_bytes is not None and mmb > max_message_bytes:
        err("max.message.bytes", f"must be at most {max_message_bytes} on this service")
    if not errors:
        # The broker's own parser has the last word on the log settings.
        try:
            LogConfig.from_properties({k: v for k, v in out.items() if k in LOG_CONFIG_NAMES})
        except (ValueError, TypeError) as exc:
            err("configs", str(exc))
    return out, errors


def effective_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Every accepted config with its effective value: the overrides over Kafka's defaults."""
    defaults = LogConfig()
    out = {
        name: str(getattr(defaults, name.replace(".", "_")))
        for name in LOG_CONFIG_NAMES & KNOWN_CONFIGS
    }
    out["min.insync.replicas"] = "1"
    out["unclean.leader.election.enable"] = "false"
    out.update(overrides)
    return dict(sorted(out.items()))
