"""The lag rules of ``spark.transforms.burrow`` over every sample's window of one partition's
history in one pass, for the benchmark's single-machine baseline.

``burrow.evaluate`` looks at a window at a time, so evaluating each of n samples over its
last w costs n * w steps and a list per sample. What the rules need of a window is a few
counts and its first and last commit: how many commits, whether any sample has no lag, and
how many commits went back, lost lag or moved against the commit before them (the window's
first commit is not counted: its predecessor is outside). Prefix counts over the history give
each of those for any window in constant time, as the SQL form (``burrow_sql``) gets them
from window aggregates. Same statuses and the same float expressions as ``evaluate``, so the
results are equal, not close; ``tests/spark/test_baseline.py`` checks it on generated
histories.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark.transforms.burrow import OK, REWIND, STALL, STOP, WARN


def _rate(first: int, last: int, t0: int, t1: int) -> float | None:
    return (last - first) * 1000.0 / (t1 - t0) if t1 > t0 else None


def evaluate_windows(
    ts: Sequence[int],
    committed: Sequence[int],
    log_end: Sequence[int],
    is_commit: Sequence[bool],
    last_commit: Sequence[int | None],
    *,
    window: int,
    min_stop_ms: int,
) -> list[tuple[str, float | None, float | None, float | None]]:
    """(status, consume rate, produce rate, catch-up s) of each sample, evaluated at its own
    time over itself and up to ``window - 1`` samples before it."""
    n = len(ts)
    lag = [max(e - c, 0) for e, c in zip(log_end, committed, strict=True)]
    zeros = [0]  # zeros[i]: samples without lag before i
    commits: list[int] = []  # sample index of each commit
    back, less, moved = [0], [0], [0]  # per commit ordinal, against the commit before it
    out = []
    first = 0  # ordinal of the first commit at or after the window's start
    for i in range(n):
        zeros.append(zeros[-1] + (lag[i] == 0))
        if is_commit[i]:
            if commits:
                p = commits[-1]
                back.append(back[-1] + (committed[i] < committed[p]))
                less.append(less[-1] + (lag[i] < lag[p]))
                moved.append(moved[-1] + (committed[i] != committed[p]))
            commits.append(i)
        start = max(0, i - window + 1)
        while first < len(commits) and commits[first] < start:
            first += 1
        count = len(commits) - first
        a = commits[first] if count else None
        b = commits[-1] if count else None
        consume = _rate(committed[a], committed[b], ts[a], ts[b]) if count >= 2 else None
        produce = _rate(log_end[start], log_end[i], ts[start], ts[i])
        catch_up = None
        if lag[i] == 0:
            catch_up = 0.0
        elif consume is not None and produce is not None and consume > produce:
            catch_up = lag[i] / (consume - produce)
        last = len(commits) - 1
        span = ts[b] - ts[a] if count else 0
        if lag[i] == 0:
            status = OK
        elif count and back[last] - back[first]:
            status = REWIND
        elif last_commit[i] is not None and ts[i] - last_commit[i] > max(min_stop_ms, span):
            status = STOP
        elif zeros[i + 1] - zeros[start]:
            status = OK
        elif count >= 2 and moved[last] == moved[first]:
            status = STALL
        elif count >= 3 and less[last] == less[first] and lag[b] > lag[a]:
            status = WARN
        else:
            status = OK
        out.append((status, consume, produce, catch_up))
    return out
