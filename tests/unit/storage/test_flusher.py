"""The log flusher's thread pool, and its fallback while the interpreter shuts down."""

from __future__ import annotations

import threading

from brokernodes.storage import flusher


def test_a_job_runs_on_a_flusher_thread():
    ran = []
    flusher.submit(lambda: ran.append(threading.current_thread().name)).result(10)
    assert ran[0].startswith("sluice-log-flusher")


def test_a_job_runs_in_the_caller_when_no_thread_can_start(monkeypatch):
    class RefusingPool:
        def submit(self, job):
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(flusher, "_pool", RefusingPool())
    ran = []
    done = flusher.submit(lambda: ran.append(threading.current_thread()))
    assert done.done() and ran == [threading.current_thread()]
