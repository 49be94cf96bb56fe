"""An ASGI wrapper that tells sync views their request is over.

A sync Django view runs in a worker thread, which nothing can cancel: when its client
disconnects, or the server stops (Daphne cancels every application instance on SIGTERM and
then waits for them), a long-polling view would keep its thread, and the server its exit,
until the poll's own deadline (up to 25 s for the brokers' metadata long polls). This
wrapper puts a ``threading.Event`` in the HTTP scope (``request.scope[ABORTED_SCOPE_KEY]``)
and sets it when the client's ``http.disconnect`` arrives or the application instance is
cancelled; a waiting view checks it between short waits and returns. ``abort_all`` sets
every live request's event at once: the server's stop (backend/asgi_shutdown.py) calls it, so
no long poll waits for Daphne to get round to cancelling its application instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

ABORTED_SCOPE_KEY = "sluice.aborted"
RELEASE_S = 2.0  # a cancelled request may end by itself for this long (below)
_live: set[threading.Event] = set()  # the events of the requests in progress


def in_progress() -> int:
    """How many requests are in progress."""
    return len(_live)


def abort_all() -> int:
    """Set the abort event of every request in progress; returns how many."""
    events = list(_live)
    for event in events:
        event.set()
    return len(events)


class AbortSignal:
    """Wraps an ASGI application; see the module docstring."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        aborted = threading.Event()
        _live.add(aborted)
        scope = {**scope, ABORTED_SCOPE_KEY: aborted}

        async def watched_receive():
            message = await receive()
            if message["type"] == "http.disconnect":
                aborted.set()
            return message

        task = asyncio.ensure_future(self.app(scope, watched_receive, send))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # shielded: on cancellation the event is set first and the request may end by
            # itself for RELEASE_S (a released long poll answers at once); only then is it
            # cancelled. A cancelled Django request leaves its view's thread running, and
            # that thread may need the event loop again after the server has stopped it.
            aborted.set()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), RELEASE_S)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            aborted.set()
            _live.discard(aborted)
