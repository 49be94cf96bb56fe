"""Consumer-lag evaluation over a window of lag samples, in plain Python (no Spark).

Burrow (LinkedIn's lag monitor) evaluates a partition over its last N *commits*: any commit
with zero lag means OK, a committed offset going backwards is REWIND, commits that keep
arriving without moving is STALL, no commit for longer than the window spans is STOP, lag
growing at every commit is WARN. Evaluating at commits only is what it misses: a consumer that
stopped with zero lag keeps its last window (all zero) and looks healthy forever. Here the
window holds samples taken at commits *and whenever the log end moved*, and the latest sample
decides whether the lag is zero, so a stopped consumer's lag grows with the log and is seen.

Statuses, first match wins:

- ``ERR``     the committed offset is below the log start offset: retention deleted records
              the group never read (its next fetch fails with OFFSET_OUT_OF_RANGE);
- ``OK``      the latest sample has no lag;
- ``REWIND``  a committed offset in the window is lower than the one before it;
- ``STOP``    no commit for longer than ``max(min_stop_ms, the window's commit span)``;
- ``OK``      some sample in the window had no lag (Burrow's first rule, after STOP);
- ``STALL``   at least two commits in the window, all at the same offset;
- ``WARN``    at least three commits in the window, their lag never shrinking and growing
              (Burrow's rule: commits only, since the log end moving between commits says
              nothing about the consumer's pace);
- ``OK``      otherwise (lag, but the consumer keeps up).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

OK, WARN, ERR, STOP, STALL, REWIND = "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"
STATUSES = (OK, WARN, ERR, STOP, STALL, REWIND)


@dataclass(frozen=True, slots=True)
class Sample:
    ts_ms: int
    committed: int
    log_end: int
    is_commit: bool

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


@dataclass(frozen=True, slots=True)
class Evaluation:
    status: str
    consume_rate: float | None  # committed offsets per second over the window's commits
    produce_rate: float | None  # log-end offsets per second over the window
    catch_up_s: float | None  # lag / (consume - produce) when the consumer gains, else None


def _rate(first: int, last: int, t0: int, t1: int) -> float | None:
    return (last - first) * 1000.0 / (t1 - t0) if t1 > t0 else None


def evaluate(
    window: Sequence[Sample],
    *,
    now_ms: int,
    last_commit_ms: int | None,
    min_stop_ms: int,
    log_start_offset: int | None = None,
) -> Evaluation:
    """The status of one partition for a group at ``now_ms`` from its last samples (oldest
    first; ``window[-1]`` is the latest at or before ``now_ms``)."""
    if not window:
        return Evaluation(OK, None, None, None)
    last = window[-1]
    commits = [s for s in window if s.is_commit]
    consume = (
        _rate(commits[0].committed, commits[-1].committed, commits[0].ts_ms, commits[-1].ts_ms)
        if len(commits) >= 2
        else None
    )
    produce = _rate(window[0].log_end, last.log_end, window[0].ts_ms, last.ts_ms)
    catch_up = None
    if last.lag == 0:
        catch_up = 0.0
    elif consume is not None and produce is not None and consume > produce:
        catch_up = last.lag / (consume - produce)

    def result(status: str) -> Evaluation:
        return Evaluation(status, consume, produce, catch_up)

    if log_start_offset is not None and last.committed < log_start_offset:
        return result(ERR)
    if last.lag == 0:
        return result(OK)
    if any(b.committed < a.committed for a, b in itertools.pairwise(commits)):
        return result(REWIND)
    span = commits[-1].ts_ms - commits[0].ts_ms if commits else 0
    if last_commit_ms is not None and now_ms - last_commit_ms > max(min_stop_ms, span):
        return result(STOP)
    if any(x.lag == 0 for x in window):
        return result(OK)
    if len(commits) >= 2 and all(c.committed == commits[0].committed for c in commits):
        return result(STALL)
    lags = [c.lag for c in commits]
    if len(lags) >= 3 and all(b >= a for a, b in itertools.pairwise(lags)) and lags[-1] > lags[0]:
        return result(WARN)
    return result(OK)
