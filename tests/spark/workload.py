"""A generated workload with known rates and commits, and its ground truth computed in plain
Python (independently of the Spark transforms): what the jobs must report.

Topic ``orders`` has four partitions produced at known rates from ``T0`` for ``MINUTES``
minutes, ending at the last whole minute of the wall clock. Five groups commit every
``COMMIT_EVERY_MS``:

- ``healthy`` (partition 0): commits the log end at every commit;
- ``stopped`` (partition 1): healthy, then stops committing at ``STOP_AT`` with no lag;
- ``stalled`` (partition 2): healthy until ``STALL_AT``, then keeps committing that offset;
- ``rewind``  (partition 3): healthy, then at ``REWIND_AT`` goes back to offset 100 and
  resumes from there at the produce rate;
- ``slow``    (partition 3): consumes at half the produce rate.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

MINUTE = 60_000
MINUTES = 30
# the workload ends at the last whole minute: brokers apply retention by their wall clock
T0 = int(time.time() * 1000) // MINUTE * MINUTE - MINUTES * MINUTE
NOW = T0 + MINUTES * MINUTE
RATES = {0: 2, 1: 2, 2: 2, 3: 10}  # records per second
COMMIT_EVERY_MS = 10_000
STOP_AT = T0 + 15 * MINUTE
STALL_AT = T0 + 10 * MINUTE
REWIND_AT = NOW - 35_000
WINDOW = 10
MIN_STOP_MS = 60_000
GROUP_PARTITION = {"healthy": 0, "stopped": 1, "stalled": 2, "rewind": 3, "slow": 3}
EXPECTED_STATUS = {
    "healthy": "OK",
    "stopped": "STOP",
    "stalled": "STALL",
    "rewind": "REWIND",
    "slow": "WARN",
}


def timestamps(partition: int) -> list[int]:
    """Record timestamps of a partition, offset = index."""
    step = 1000 // RATES[partition]
    return list(range(T0, NOW, step))


def log_end_at(ts: list[int], t: int) -> int:
    """Records stamped at or before ``t`` (timestamps increase with offsets)."""
    return bisect.bisect_right(ts, t)


def commits(group: str) -> list[tuple[int, int]]:
    """(commit time, committed offset) of a group."""
    ts = timestamps(GROUP_PARTITION[group])
    out = []
    stalled_at = None
    for t in range(T0 + COMMIT_EVERY_MS, NOW + 1, COMMIT_EVERY_MS):
        end = log_end_at(ts, t)
        if group == "healthy":
            out.append((t, end))
        elif group == "stopped":
            if t <= STOP_AT:
                out.append((t, end))
        elif group == "stalled":
            if t <= STALL_AT:
                out.append((t, end))
                stalled_at = end
            else:
                out.append((t, stalled_at))
        elif group == "rewind":
            if t < REWIND_AT:
                out.append((t, end))
            else:
                out.append((t, 100 + (t - REWIND_AT) * RATES[3] // 1000))
        elif group == "slow":
            out.append((t, min(end, (t - T0) * RATES[3] // 2000)))
    # the rewind commit itself, between two regular commits
    if group == "rewind":
        out.append((REWIND_AT, 100))
        out.sort()
    return out


@dataclass(frozen=True)
class TruthSample:
    ts_ms: int
    committed: int
    log_end: int
    is_commit: bool

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


def samples(group: str) -> list[TruthSample]:
    """Commits and one sample per minute the log end moved (at the minute's last record),
    from the first commit on, with the committed offset and log end at that time."""
    p = GROUP_PARTITION[group]
    ts = timestamps(p)
    cs = commits(group)
    moves: dict[int, int] = {}
    for t in ts:
        moves[(t - T0) // MINUTE] = t  # last record time of each minute
    events = [(t, 0, None) for t in moves.values()] + [(t, 1, c) for t, c in cs]
    events.sort(key=lambda e: (e[0], e[1]))
    out = []
    committed = None
    for t, kind, c in events:
        if kind == 1:
            committed = c
        if committed is None:
            continue
        out.append(TruthSample(t, committed, log_end_at(ts, t), kind == 1))
    return out


def time_lag(group: str, s: TruthSample) -> int:
    ts = timestamps(GROUP_PARTITION[group])
    if s.lag == 0:
        return 0
    return max(s.ts_ms - ts[s.committed], 0)
