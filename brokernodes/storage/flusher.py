"""The log flusher: the process's background threads that fsync rolled segments.

Kafka's ``UnifiedLog.roll`` schedules a ``flush-log`` task on the broker's scheduler instead
of fsyncing the old segment in the append that rolled it: that fsync writes up to a whole
segment of dirty pages (about 0.56 s for 1 GiB on the development VM), and the partition's
producers would wait for it on every roll. ``PartitionLog`` does the same through ``submit``;
the recovery point passes the rolled segment once its fsync is done, so a crash before then
recovers from an earlier segment, as in Kafka.

A few threads for the whole process (not one per log): fsyncs are disk-bound, rolls are rare,
and a log never has more than one flush queued (``PartitionLog._schedule_rolled_flush``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["FLUSHER_THREADS", "submit"]

FLUSHER_THREADS = 2

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def submit(job: Callable[[], None]) -> Future[None]:
    """Run ``job`` on a flusher thread (started on first use); its future. While the
    interpreter shuts down no thread can start, and ``job`` runs in the caller instead."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(FLUSHER_THREADS, thread_name_prefix="sluice-log-flusher")
        pool = _pool
    try:
        return pool.submit(job)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        done: Future[None] = Future()
        job()
        done.set_result(None)
        return done
