"""The history of one fault scenario and the checks an outside checker runs on it.

Recorded: every produce attempt (a unique value, its producer and its place in that
producer's send order), every acknowledgement (value -> partition, offset), every failed
delivery, every fault injected, every record a consumer read while the faults ran, the
final contents of each partition read through its leader up to the high watermark, and
the same partition read raw from every replica's segment files. Checked:

- **lost**: an acknowledged value found nowhere in the final contents;
- **wrong offset**: an acknowledged value found, but not at the offset it was acknowledged at;
- **duplicated**: a value at two offsets (an idempotent producer must never cause it);
- **reordered**: per producer and partition, acknowledged offsets do not rise in send order;
- **phantom**: a record in the log (through the leader or on any replica) that nobody
  attempted;
- **divergent**: below the high watermark, an offset where a replica's log differs from the
  leader's (another value, or missing: a hole), a hole in the leader's own log, or a record
  a consumer read during the run that the final log holds differently (a read above the HW);
- **unknown**: attempted, never answered (neither acknowledged nor failed): counted and
  reported, not an error, since the outcome of an unanswered write is unknown;
- **seconds to recover**: for each fault, how long until a record sent after it was
  acknowledged on every partition that acknowledged anything afterwards (the slowest).
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
    unknown: list[str]
    lost: list[str]
    wrong_offset: list[str]
    duplicated: list[str]
    reordered: list[str]
    phantom: list[str]
    divergent: list[str]
    seconds_to_recover: float | None
    replicas_compared: int
    extra: dict = field(default_factory=dict)

    # what ``report`` fails on; ``unknown`` is reported only
    ERRORS = ("lost", "wrong_offset", "duplicated", "reordered", "phantom", "divergent")

    def counts(self) -> dict:
        return {
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "unknown": len(self.unknown),
            **{name: len(getattr(self, name)) for name in self.ERRORS},
            "seconds_to_recover": self.seconds_to_recover,
            "replicas_compared": self.replicas_compared,
            "group_offsets_check": "checked"
            if "group_offsets_moved_back" in self.extra
            else "skipped (no consumer group in this scenario)",
            **self.extra,
        }

    def summary(self) -> str:
        c = self.counts()
        keys = ("attempted", "acknowledged", "failed", "unknown", *self.ERRORS)
        recover = c["seconds_to_recover"]
        return (
            f"[{self.name}] "
            + " ".join(f"{k}={c[k]}" for k in keys)
            + f" seconds_to_recover={recover if recover is None else round(recover, 2)}"
            + f" replicas_compared={self.replicas_compared}"
        )

    def problems(self) -> dict[str, list[str]]:
        return {name: getattr(self, name) for name in self.ERRORS if getattr(self, name)}


class History:
    """Thread-safe record of a run (producer callbacks arrive on the SDK's loop thread)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.attempts: dict[str, tuple[str, int, float]] = {}  # value -> (producer, seq, t)
        self.acks: dict[str, tuple[int, int | None, float]] = {}  # value -> (partition, offset, t)
        self.failures: dict[str, str] = {}
        self.faults: list[tuple[str, float]] = []
        self.reads: dict[tuple[int, int], str] = {}  # (partition, offset) -> value
        self.read_conflicts: list[tuple[int, int]] = []
        self.final: dict[int, list[tuple[int, str]]] = {}
        self.high_watermarks: dict[int, int] = {}
        # partition -> broker -> [(offset, value)] below the HW, raw from its segment files
        self.replicas: dict[int, dict[int, list[tuple[int, str]]]] = {}

    def attempt(self, value: str, producer: str = "", seq: int = 0) -> None:
        with self._lock:
            self.attempts[value] = (producer, seq, time.monotonic())

    def ack(self, value: str, partition: int, offset: int | None) -> None:
        """``offset`` None: acknowledged without one (librdkafka reports a retried batch the
        broker answered as a duplicate so); checked for loss and duplication only."""
        with self._lock:
            self.acks[value] = (partition, offset, time.monotonic())

    def fail(self, value: str, error: BaseException) -> None:
        with self._lock:
            self.failures[value] = f"{type(error).__name__}: {error}"

    def fault(self, what: str) -> None:
        """Mark the moment a fault is injected (for seconds to recover)."""
        with self._lock:
            self.faults.append((what, time.monotonic()))

    def read(self, partition: int, offset: int, value: str) -> None:
        with self._lock:
            old = self.reads.setdefault((partition, offset), value)
            if old != value:
                self.read_conflicts.append((partition, offset))

    def acks_between(self, start: float, end: float) -> list[str]:
        with self._lock:
            return [v for v, (_, _, t) in self.acks.items() if start <= t <= end]

    # --- checks ----------------------------------------------------------------------------

    def check(self) -> Verdict:
        with self._lock:
            return self._check()

    def _check(self) -> Verdict:
        at: dict[tuple[int, int], str] = {}
        where: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for partition, records in self.final.items():
            for offset, value in records:
                at[(partition, offset)] = value
                where[value].append((partition, offset))
        lost, wrong_offset = [], []
        for value, (partition, offset, _) in self.acks.items():
            if value not in where:
                lost.append(value)
            elif offset is None:
                continue  # acknowledged without an offset (librdkafka: a duplicate's answer)
            elif at.get((partition, offset)) != value:
                wrong_offset.append(
                    f"{value}: acknowledged at {partition}/{offset}, in the log at {where[value]}"
                )
        duplicated = [f"{v} at {places}" for v, places in where.items() if len(places) > 1]
        unknown = [v for v in self.attempts if v not in self.acks and v not in self.failures]
        return Verdict(
            self.name,
            attempted=len(self.attempts),
            acknowledged=len(self.acks),
            failed=len(self.failures),
            unknown=unknown,
            lost=lost,
            wrong_offset=wrong_offset,
            duplicated=duplicated,
            reordered=self._reordered(),
            phantom=self._phantoms(),
            divergent=self._divergent(at),
            seconds_to_recover=self._seconds_to_recover(),
            replicas_compared=sum(len(r) for r in self.replicas.values()),
        )

    def _reordered(self) -> list[str]:
        """Per producer and partition, acknowledged offsets must rise in send order."""
        sent: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
        for value, (partition, offset, _) in self.acks.items():
            if offset is None:  # acknowledged without an offset: nothing to order
                continue
            producer, seq, _ = self.attempts.get(value, ("?", -1, 0.0))
            sent[(producer, partition)].append((seq, offset, value))
        out = []
        for (producer, partition), rows in sent.items():
            highest = -1
            for seq, offset, value in sorted(rows):
                if offset <= highest:
                    out.append(
                        f"{value} (#{seq} of {producer}) at {partition}/{offset} <= {highest}"
                    )
                highest = max(highest, offset)
        return out

    def _phantoms(self) -> list[str]:
        """Values in the log, through the leader or on any replica, that nobody attempted."""
        seen = {value for records in self.final.values() for _, value in records}
        for replicas in self.replicas.values():
            for records in replicas.values():
                seen.update(value for _, value in records)
        return sorted(v for v in seen if v not in self.attempts)

    def _divergent(self, at: dict[tuple[int, int], str]) -> list[str]:
        out = []
        for partition, records in self.final.items():
            hw = self.high_watermarks.get(partition, 0)
            offsets = [o for o, _ in records]
            first = offsets[0] if offsets else hw
            held = set(offsets)
            out += [
                f"hole at {partition}/{o} on the leader" for o in range(first, hw) if o not in held
            ]
            leader = {o: v for o, v in records if o < hw}
            for broker, replica in sorted(self.replicas.get(partition, {}).items()):
                mine = {o: v for o, v in replica if first <= o < hw}
                for o in sorted(set(leader) | set(mine)):
                    if leader.get(o) != mine.get(o):
                        out.append(
                            f"{partition}/{o}: leader {leader.get(o)!r}, "
                            f"broker {broker} {mine.get(o)!r}"
                        )
        for key, value in self.reads.items():
            partition, offset = key
            if key in at:
                if at[key] != value:
                    out.append(f"read {value!r} at {partition}/{offset}, now {at[key]!r}")
            elif offset < self.high_watermarks.get(partition, 0):
                out.append(f"read {value!r} at {partition}/{offset}, now gone")
        out += [f"two reads of {p}/{o} disagree" for p, o in self.read_conflicts]
        return out

    def _seconds_to_recover(self) -> float | None:
        """For each fault, the time until a record sent after it is acknowledged on every
        partition that acknowledges one at all; the slowest fault's."""
        if not self.faults:
            return None
        worst = 0.0
        for _, t in self.faults:
            first: dict[int, float] = {}
            for value, (partition, _, acked) in self.acks.items():
                if self.attempts.get(value, ("", 0, 0.0))[2] >= t:
                    first[partition] = min(first.get(partition, acked), acked)
            if first:
                worst = max(worst, max(first.values()) - t)
        return round(worst, 3)
