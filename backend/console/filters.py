"""Message-browser filters, pure (no Django, no I/O): a JSON path and a header match.

The JSON path is a small, closed grammar evaluated by walking parsed JSON; nothing the user
types is ever compiled or run. Grammar: ``$`` then any of ``.name``, ``["name"]`` or ``[N]``
(``$.order.items[0].sku``). A filter keeps a record when the path resolves and, if a value
is given, the resolved value rendered as text equals it (strings compare by content, other
JSON values by their compact JSON text: ``42``, ``true``, ``null``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

MAX_PATH_LENGTH = 200
MAX_STEPS = 32
_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d{1,9})\]|\["((?:[^"\\]|\\.){0,100})"\]')


class InvalidJsonPath(ValueError):
    pass


@dataclass(frozen=True)
class JsonPath:
    steps: tuple[str | int, ...]

    def resolve(self, doc: Any) -> tuple[bool, Any]:
        """(found, value) of this path in ``doc``."""
        node = doc
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(node, list) or step >= len(node):
                    return False, None
                node = node[step]
            else:
                if not isinstance(node, dict) or step not in node:
                    return False, None
                node = node[step]
        return True, node


def parse_json_path(text: str) -> JsonPath:
    text = text.strip()
    if len(text) > MAX_PATH_LENGTH:
        raise InvalidJsonPath(f"a JSON path is at most {MAX_PATH_LENGTH} characters")
    if not text.startswith("$"):
        raise InvalidJsonPath('a JSON path starts with $, e.g. $.order.id or $["a b"][0]')
    pos, steps = 1, []
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise InvalidJsonPath(
                f'cannot read the JSON path at character {pos + 1}: use .name, ["name"] or [N]'
            )
        name, index, quoted = m.groups()
        if index is not None:
            steps.append(int(index))
        elif name is not None:
            steps.append(name)
        else:
            steps.append(json.loads(f'"{quoted}"'))
        pos = m.end()
        if len(steps) > MAX_STEPS:
            raise InvalidJsonPath(f"a JSON path has at most {MAX_STEPS} steps")
    return JsonPath(tuple(steps))


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def json_path_matches(path: JsonPath, value: Any, value_format: str, expected: str | None) -> bool:
    """Whether a record's value (as the broker rendered it) passes the JSON-path filter."""
    if value_format != "json":
        return False
    found, got = path.resolve(value)
    if not found:
        return False
    return expected is None or as_text(got) == expected


def header_matches(headers: list[dict], name: str, expected: str | None) -> bool:
    """Whether a record has header ``name`` (with UTF-8 value ``expected`` when given).
    ``headers`` are the broker's ``[{"name", "value": <base64 or null>}]``."""
    for h in headers or ():
        if h.get("name") != name:
            continue
        if expected is None:
            return True
        raw = h.get("value")
        if raw is None:
            continue
        try:
            text = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
        if text == expected:
            return True
    return False
