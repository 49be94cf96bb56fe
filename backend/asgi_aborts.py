"""An ASGI wrapper that tells sync views their request is over.

A sync Django view runs in a worker thread, which nothing can cancel: when its client
disconnects, or the server stops (Daphne cancels every application instance on SIGTERM and
then waits for them), a long-polling view would keep its thread, and the server its exit,
until the poll's own deadline (up to 25 s for the brokers' metadata long polls). This
wrapper puts a ``threading.Event`` in the HTTP scope (``request.scope[ABORTED_SCOPE_KEY]``)
and sets it when the client's ``http.disconnect`` arrives or the application instance is
cancelled; a waiting view checks it between short waits and returns.
"""

from __future__ import annotations

import asyncio
import threading

ABORTED_SCOPE_KEY = "sluice.aborted"


class AbortSignal:
    """Wraps an ASGI application; see the module docstring."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        aborted = threading.Event()
        scope = {**scope, ABORTED_SCOPE_KEY: aborted}

        async def watched_receive():
            message = await receive()
            if message["type"] == "http.disconnect":
                aborted.set()
            return message

        task = asyncio.ensure_future(self.app(scope, watched_receive, send))
        try:
            # shielded: on cancellation the event is set first, so the view's thread is already
            # returning while the inner application unwinds (it waits for that thread)
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            aborted.set()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            aborted.set()
