"""backend/asgi_aborts.py: a sync view's long poll learns that its request is over when the
client disconnects or the server cancels the request (Daphne on SIGTERM)."""

from __future__ import annotations

import asyncio
import threading

from backend.asgi_aborts import ABORTED_SCOPE_KEY, AbortSignal


class WaitingView:
    """An app whose 'view' waits in a thread until the abort event (bounded), as
    metadata_log.read_since does, and then answers."""

    def __init__(self) -> None:
        self.event: threading.Event | None = None
        self.ended_by_abort = False

    async def __call__(self, scope, receive, send):
        self.event = scope[ABORTED_SCOPE_KEY]
        listener = asyncio.ensure_future(receive())  # Django listens for http.disconnect
        thread = asyncio.ensure_future(asyncio.to_thread(self.event.wait, 5.0))
        try:
            self.ended_by_abort = await asyncio.shield(thread)
        except asyncio.CancelledError:
            # as asgiref does, a cancelled request still waits for its view's thread
            self.ended_by_abort = await thread
            raise
        finally:
            listener.cancel()


def test_a_client_disconnect_sets_the_event():
    app = WaitingView()
    messages: asyncio.Queue = asyncio.Queue()

    async def main():
        task = asyncio.ensure_future(AbortSignal(app)({"type": "http"}, messages.get, None))
        await asyncio.sleep(0.05)
        assert app.event is not None and not app.event.is_set()
        await messages.put({"type": "http.disconnect"})
        await asyncio.wait_for(task, 2)

    asyncio.run(main())
    assert app.ended_by_abort


def test_cancelling_the_request_sets_the_event_before_the_view_returns():
    app = WaitingView()

    async def never():
        await asyncio.sleep(10)

    async def main():
        task = asyncio.ensure_future(AbortSignal(app)({"type": "http"}, never, None))
        await asyncio.sleep(0.05)
        task.cancel()  # what Daphne does to every application instance on SIGTERM
        done, _ = await asyncio.wait([task], timeout=2)
        assert done, "the cancelled request did not end within 2 s"

    asyncio.run(main())
    assert app.ended_by_abort


def test_other_scopes_pass_through():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope)

    asyncio.run(AbortSignal(app)({"type": "websocket"}, None, None))
    assert seen == [{"type": "websocket"}]
