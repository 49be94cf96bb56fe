"""The control plane's stop under Daphne is bounded: it exits within ``STOP_DEADLINE_S`` of
SIGTERM whatever its clients do (infra/README.md, "How long a stop takes").

Why it was not: Daphne cancels the application instances it knows when its reactor starts to
stop, but keeps accepting connections until the reactor's ports close a moment later. A
broker re-issues its metadata long poll the moment the previous one is answered, so a request
often arrived in that window; its sync view ran in a worker thread that later waited for the
stopped event loop (asgiref's AsyncToSync), and the interpreter's exit waited for that
non-daemon thread for ever.

So, from the first moment of the stop (Twisted's "before shutdown" trigger):

- ``StopGate`` answers every new HTTP request ``503 SERVER_STOPPING`` (``Retry-After``,
  ``Connection: close``) and refuses new WebSockets, without entering Django: no new thread;
- every request in progress is told it is over (``asgi_aborts.abort_all``), so long polls
  return at once, and the reactor waits (at most ``DRAIN_S``) until they have answered.
  Daphne's own wait ends as soon as the first cancelled instance ends (``asyncio.gather``
  without ``return_exceptions``), which left the others' threads waiting for a stopped loop;
- a daemon timer ends the process with ``os._exit`` if it is still alive ``STOP_DEADLINE_S``
  after SIGTERM, or ``AFTER_STOP_S`` after the reactor has stopped (no thread still running
  then can finish: the loop it would need is gone); it first logs what each such thread
  was doing, so a hang names its cause.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
import traceback

from backend.asgi_aborts import abort_all, in_progress

logger = logging.getLogger("sluice.asgi")

STOP_DEADLINE_S = float(os.environ.get("SLUICE_CONTROL_PLANE_STOP_S", "10"))
AFTER_STOP_S = 2.0
DRAIN_S = 5.0
ERROR_CODE = "SERVER_STOPPING"


class StopGate:
    """Wraps an ASGI application; once ``stop`` is called, new connections are refused."""

    def __init__(self, app) -> None:
        self.app = app
        self.stopping = False

    def stop(self) -> None:
        self.stopping = True

    async def __call__(self, scope, receive, send):
        if not self.stopping or scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1001})  # going away
            return None
        body = json.dumps(
            {
                "error_code": ERROR_CODE,
                "message": "the control plane is stopping; retry against another instance "
                "or once it is back",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"1"),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return None


def _stuck_threads() -> str:
    """What every thread but the caller is doing (for the log of a forced exit)."""
    me = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        if ident != me:
            stack = "".join(traceback.format_stack(frame, limit=8))
            out.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(out)


class StopDeadline:
    """Arms, once, a daemon timer that ends the process (see the module docstring)."""

    def __init__(self, deadline_s: float = STOP_DEADLINE_S, after_stop_s: float = AFTER_STOP_S):
        self.deadline_s = deadline_s
        self.after_stop_s = after_stop_s
        self.exit_at: float | None = None
        self._lock = threading.Lock()
        self._timer: threading.Thread | None = None

    def arm(self) -> None:
        """The stop has begun: exit at the latest ``deadline_s`` from now."""
        self._move(time.monotonic() + self.deadline_s)

    def stopped(self) -> None:
        """The server loop has ended: exit at the latest ``after_stop_s`` from now."""
        self._move(time.monotonic() + self.after_stop_s)

    def _move(self, at: float) -> None:
        with self._lock:
            if self.exit_at is None or at < self.exit_at:
                self.exit_at = at
            if self._timer is None:
                self._timer = threading.Thread(
                    target=self._run, name="sluice-stop-deadline", daemon=True
                )
                self._timer.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                remaining = self.exit_at - time.monotonic()  # type: ignore[operator]
            if remaining <= 0:
                break
            time.sleep(min(remaining, 0.1))
        logger.warning(
            "still running at the stop deadline; exiting now. Threads left:\n%s",
            _stuck_threads(),
        )
        logging.shutdown()
        os._exit(0)


async def drained(timeout_s: float) -> int:
    """Wait until no request is in progress, at most ``timeout_s``; returns how many are
    left."""
    deadline = time.monotonic() + timeout_s
    while in_progress() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return in_progress()


def install(gate: StopGate, deadline: StopDeadline | None = None) -> bool:
    """Hook the stop into the running Twisted reactor (Daphne); False when there is none
    (runserver, tests, management commands import this module too)."""
    if "twisted.internet.reactor" not in sys.modules:
        return False
    from twisted.internet import defer, reactor

    deadline = deadline or StopDeadline()

    def stopping():
        deadline.arm()
        gate.stop()
        released = abort_all()
        logger.info("stopping: new requests refused, %d in progress released", released)
        return defer.Deferred.fromFuture(asyncio.ensure_future(drained(DRAIN_S)))

    reactor.addSystemEventTrigger("before", "shutdown", stopping)
    reactor.addSystemEventTrigger("after", "shutdown", deadline.stopped)
    return True
