"""How an audit event reads to a person: the name of what it touched and what changed.
Pure: no database.

Events keep the object's id (a topic's UUID changes on every re-creation, so it names one
incarnation); the name comes from the snapshot the event holds, or is the id itself where
the id is the name (a consumer group). ``changes`` is the field-by-field difference of the
before and after snapshots, nested fields (a topic's ``configs``) by dotted path.
"""

from __future__ import annotations

from typing import Any

NAMED_BY_ID = frozenset({"group"})  # object types whose id is their name
NAME_KEYS = ("name", "username", "principal")


def object_name(object_type: str, object_id: str, before: Any, after: Any) -> str | None:
    """The touched object's name, or None when the event does not say."""
    if object_type in NAMED_BY_ID:
        return object_id or None
    for snapshot in (after, before):
        if isinstance(snapshot, dict):
            for key in NAME_KEYS:
                if isinstance(snapshot.get(key), str) and snapshot[key]:
                    return snapshot[key]
    return None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value} if prefix else {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(item, dict):  # an empty one has no fields to show
            out.update(_flatten(item, path))
        else:
            out[path] = item
    return out


def changes(before: Any, after: Any) -> list[dict[str, Any]]:
    """Each field whose value differs, as ``{field, before, after}`` (None: absent)."""
    old, new = _flatten(before or {}), _flatten(after or {})
    rows = []
    for path in sorted(set(old) | set(new)):
        if old.get(path) != new.get(path) or (path in old) != (path in new):
            rows.append({"field": path, "before": old.get(path), "after": new.get(path)})
    return rows
