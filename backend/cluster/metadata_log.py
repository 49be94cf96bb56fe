"""The versioned metadata log: append (inside the caller's transaction), read, compact.

Writers take a row lock on ``ClusterState`` and bump its version, so versions are handed out
in commit order: a broker that has seen version V has seen every record at or below V (an
auto-increment id would not promise that under concurrent PostgreSQL transactions). Readers
wake on a process-local condition when a write commits here, and poll the head row otherwise
(other processes), so long polls answer within ``POLL_INTERVAL_S`` of a commit anywhere.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.db import transaction

from backend.cluster.models import ClusterState, MetadataRecord

POLL_INTERVAL_S = 0.2
MAX_WAIT_MS = 25_000

_changed = threading.Condition()
_generation = 0  # bumped by every local commit, so a wake-up between check and wait is kept


def _state(*, lock: bool) -> ClusterState:
    qs = ClusterState.objects.select_for_update() if lock else ClusterState.objects
    state = qs.filter(pk=1).first()
    if state is None:  # the migration creates it; tests that flush tables may not
        state, _ = ClusterState.objects.get_or_create(pk=1)
        if lock:
            state = ClusterState.objects.select_for_update().get(pk=1)
    return state


def _notify() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


def lock() -> int:
    """Take the metadata lock (the ``ClusterState`` row) in the current transaction; returns
    the head version. Services that change partition state take it first, so every writer
    locks in the same order (this row, then assignment rows) and none can deadlock."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("metadata_log.lock() needs a transaction")
    return _state(lock=True).version


def append(kind: str, key: str, value: dict | None) -> int:
    """Append one record in the current transaction; returns its version."""
    with transaction.atomic():  # joins the caller's transaction (every service is atomic)
        state = _state(lock=True)
        state.version += 1
        state.save(update_fields=["version"])
        MetadataRecord.objects.create(version=state.version, kind=kind, key=str(key), value=value)
        transaction.on_commit(_notify)
    return state.version


def head() -> tuple[int, int]:
    """(head version, log start version)."""
    s = _state(lock=False)
    return s.version, s.log_start_version


@dataclass(frozen=True)
class MetadataAnswer:
    version: int
    log_start_version: int
    reset: bool  # True: ``records`` is the full image (replace what you have)
    records: list[dict]


def image() -> MetadataAnswer:
    """Every live entity's latest record (the log compacted in memory)."""
    version, start = head()
    latest: dict[tuple[str, str], MetadataRecord] = {}
    # every committed record, not only those up to the head read above: a compaction
    # running meanwhile may delete a record superseded by a newer one
    for r in MetadataRecord.objects.order_by("version"):
        latest[(r.kind, r.key)] = r
        version = max(version, r.version)
    records = [r.as_dict() for r in latest.values() if r.value is not None]
    records.sort(key=lambda r: r["version"])
    return MetadataAnswer(version, start, True, records)


def read_since(
    since: int,
    *,
    wait_ms: int = 0,
    limit: int = 10_000,
    aborted: threading.Event | None = None,
) -> MetadataAnswer:
    """Records after ``since`` (long-polling up to ``wait_ms`` while there are none), or the
    full image when ``since`` is 0, compacted away, or ahead of the head (a reset log).
    ``aborted`` (set when the client disconnects or the server stops) ends the wait within
    ``POLL_INTERVAL_S``: a sync view's thread cannot be cancelled, and the ASGI server waits
    for it before it exits."""
    deadline = time.monotonic() + min(max(wait_ms, 0), MAX_WAIT_MS) / 1000
    while True:
        seen = _generation
        version, start = head()
        if since <= 0 or since < start or since > version:
            return image()
        if version > since:
            records = [
                r.as_dict()
                for r in MetadataRecord.objects.filter(version__gt=since, version__lte=version)[
                    :limit
                ]
            ]
            last = records[-1]["version"] if records else version
            return MetadataAnswer(last, start, False, records)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or (aborted is not None and aborted.is_set()):
            return MetadataAnswer(version, start, False, [])
        with _changed:
            _changed.wait_for(
                lambda seen=seen: _generation != seen, min(remaining, POLL_INTERVAL_S)
            )


@transaction.atomic
def compact(*, keep_tombstones: int = 1000) -> int:
    """Delete superseded records, and tombstones more than ``keep_tombstones`` versions old
    (moving the log start past them, so brokers that far behind get the full image).
    Returns how many records were deleted."""
    state = _state(lock=True)
    latest: dict[tuple[str, str], int] = {}
    superseded: list[int] = []
    for version, kind, key in MetadataRecord.objects.values_list("version", "kind", "key"):
        prev = latest.get((kind, key))
        if prev is not None:
            superseded.append(prev)
        latest[(kind, key)] = version
    cutoff = state.version - keep_tombstones
    old_tombstones = list(
        MetadataRecord.objects.filter(value__isnull=True, version__lte=cutoff).values_list(
            "version", flat=True
        )
    )
    deleted = 0
    for chunk_start in range(0, len(superseded), 500):
        deleted += MetadataRecord.objects.filter(
            version__in=superseded[chunk_start : chunk_start + 500]
        ).delete()[0]
    if old_tombstones:
        deleted += MetadataRecord.objects.filter(version__in=old_tombstones).delete()[0]
        state.log_start_version = max(state.log_start_version, max(old_tombstones))
        state.save(update_fields=["log_start_version"])
    return deleted
