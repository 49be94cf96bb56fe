"""The history of one fault scenario and the checks run on it.

Recorded: every produce attempt (a unique value), every acknowledgement (value -> partition,
offset), every failed delivery, every record a consumer read while the faults ran, and the
final drained contents of each partition after healing. Checked:

- **lost**: an acknowledged value missing from the final contents, or found elsewhere than
  at its acknowledged offset;
- **divergent**: an offset holding two values (final contents vs. an acknowledgement, or
  vs. what a consumer read during the run; the latter is also a read above the high
  watermark, since only uncommitted data can be replaced);
- **duplicated**: a value at two offsets (idempotent producers must never cause it);
- **read above HW**: a consumer read a record that is not in the final contents at that
  offset (``divergent_reads``);
- committed consumer-group offsets never moving back: checked by ``load.GroupReader`` in
  the scenarios that run a group member (leader kills); the others report it skipped.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Verdict:
    name: str
    attempted: int
    acknowledged: int
    failed: int
    lost: list[str]
    duplicated: list[str]
    divergent: list[tuple[int, int]]
    divergent_reads: list[tuple[int, int]]
    extra: dict = field(default_factory=dict)

    def counts(self) -> dict:
        return {
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "divergent": len(self.divergent) + len(self.divergent_reads),
            "group_offsets_check": "checked"
            if "group_offsets_moved_back" in self.extra
            else "skipped (no consumer group in this scenario)",
            **self.extra,
        }

    def summary(self) -> str:
        c = self.counts()
        return (
            f"[{self.name}] attempted={c['attempted']} acknowledged={c['acknowledged']} "
            f"failed={c['failed']} lost={c['lost']} duplicated={c['duplicated']} "
            f"divergent={c['divergent']}"
        )

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.divergent or self.divergent_reads)


class History:
    """Thread-safe record of a run (producer callbacks arrive on the SDK's loop thread)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.attempts: dict[str, float] = {}
        self.acks: dict[str, tuple[int, int, float]] = {}  # value -> (partition, offset, t)
        self.failures: dict[str, str] = {}
        self.reads: dict[tuple[int, int], str] = {}  # (partition, offset) -> value
        self.read_conflicts: list[tuple[int, int]] = []
        self.final: dict[int, list[tuple[int, str]]] = {}

    def attempt(self, value: str) -> None:
        with self._lock:
            self.attempts[value] = time.monotonic()

    def ack(self, value: str, partition: int, offset: int) -> None:
        with self._lock:
            self.acks[value] = (partition, offset, time.monotonic())

    def fail(self, value: str, error: BaseException) -> None:
        with self._lock:
            self.failures[value] = f"{type(error).__name__}: {error}"

    def read(self, partition: int, offset: int, value: str) -> None:
        with self._lock:
            old = self.reads.setdefault((partition, offset), value)
            if old != value:
                self.read_conflicts.append((partition, offset))

    def acks_between(self, start: float, end: float) -> list[str]:
        with self._lock:
            return [v for v, (_, _, t) in self.acks.items() if start <= t <= end]

    def check(self) -> Verdict:
        at: dict[tuple[int, int], str] = {}
        where: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for partition, records in self.final.items():
            for offset, value in records:
                at[(partition, offset)] = value
                where[value].append((partition, offset))
        lost = []
        divergent = []
        for value, (partition, offset, _) in self.acks.items():
            found = at.get((partition, offset))
            if found is None or found != value:
                if value not in where:
                    lost.append(value)
                else:
                    divergent.append((partition, offset))
        duplicated = [v for v, places in where.items() if len(places) > 1]
        divergent_reads = [
            key for key, value in self.reads.items() if key in at and at[key] != value
        ]
        # a read of an offset the final log does not hold at all was a read of lost data
        divergent_reads += [
            key
            for key in self.reads
            if key not in at and key[1] < max((o for (p, o) in at if p == key[0]), default=-1)
        ]
        divergent_reads += self.read_conflicts
        return Verdict(
            self.name,
            attempted=len(self.attempts),
            acknowledged=len(self.acks),
            failed=len(self.failures),
            lost=lost,
            duplicated=duplicated,
            divergent=divergent,
            divergent_reads=divergent_reads,
        )
