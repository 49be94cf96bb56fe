"""Query-parameter parsing (pure): every error names the parameter and what it accepts."""

from __future__ import annotations

from collections.abc import Mapping

from brokernodes.errors import InvalidRequestError

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # Kafka's offsets, timestamps and sizes
INT32_MAX = 2**31 - 1  # Kafka's partition numbers
MAX_INT_DIGITS = 24  # longer is no int64, and never worth parsing


def int_param(
    query: Mapping[str, str],
    name: str,
    default: int | None = None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """An integer query parameter in [minimum, maximum] (never outside int64, Kafka's
    widest integer); ``default`` when absent."""
    raw = query.get(name)
    if raw is None or raw == "":
        if default is None:
            raise InvalidRequestError(f"query parameter {name!r} is required")
        return default
    try:
        if len(raw) > MAX_INT_DIGITS:
            raise ValueError(raw)
        value = int(raw, 10)
    except ValueError:
        raise InvalidRequestError(
            f"query parameter {name!r} must be an integer, got {raw[:40]!r}"
        ) from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidRequestError(
            f"query parameter {name!r} must fit in a signed 64-bit integer, got {raw[:40]!r}"
        )
    if minimum is not None and value < minimum:
        raise InvalidRequestError(f"query parameter {name!r} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidRequestError(f"query parameter {name!r} must be <= {maximum}, got {value}")
    return value


def acks_param(query: Mapping[str, str]) -> int:
    """``acks=0|1|all`` -> 0, 1 or -1 (Kafka's encoding of all); default 1."""
    raw = query.get("acks", "1")
    try:
        return ACKS[raw]
    except KeyError:
        raise InvalidRequestError(
            f"query parameter 'acks' must be 0, 1 or all, got {raw[:40]!r}"
        ) from None


def choice_param(
    query: Mapping[str, str], name: str, choices: tuple[str, ...], default: str
) -> str:
    raw = query.get(name, default)
    if raw not in choices:
        raise InvalidRequestError(
            f"query parameter {name!r} must be one of {', '.join(choices)}, got {raw[:40]!r}"
        )
    return raw


def partition_param(raw: str) -> int:
    """A partition number from the path."""
    try:
        value = int(raw, 10) if len(raw) <= MAX_INT_DIGITS else -1
    except ValueError:
        value = -1
    if not 0 <= value <= INT32_MAX:
        raise InvalidRequestError(
            f"partition must be a number in [0, {INT32_MAX}], got {raw[:40]!r}"
        )
    return value


def timestamp_param(query: Mapping[str, str]) -> int:
    """``timestamp=earliest|latest|<epoch ms>`` -> -2, -1 or the time (Kafka's ListOffsets)."""
    raw = query.get("timestamp", "latest")
    if raw == "earliest":
        return -2
    if raw == "latest":
        return -1
    return int_param(query, "timestamp", minimum=0)
