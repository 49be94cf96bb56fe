"""Words and numbers the ``sluice`` commands read and print: durations in human units, counts
with the right plural, and "did you mean" for a mistyped command or flag. Pure functions."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|min|m|h|d)?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds from ``250ms``, ``30s``, ``5m``, ``1.5h``, ``2d`` or a bare number of seconds.

    A bare number stays seconds so the earlier ``--timeout 30`` keeps working."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(
            f"{text!r} is not a duration; use a number with a unit: 250ms, 30s, 5m, 1h "
            f"(a bare number is seconds)"
        )
    value = float(match.group(1))
    unit = (match.group(2) or "s").lower()
    return value * _UNITS[unit]


def format_duration(seconds: float) -> str:
    """``0.25`` -> ``250 ms``, ``12.34`` -> ``12.3 s``, ``240`` -> ``4 min``, ``3900`` ->
    ``1 h 5 min``: the unit a person would say, with at most one decimal."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    if seconds < 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min" + (f" {rest} s" if rest else "")
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 record``, ``2 records``, ``0 records``; counts get thousands separators."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count:,} {word}"


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest of ``choices`` to a mistyped ``word``, or None when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None
