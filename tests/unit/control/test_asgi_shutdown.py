"""backend/asgi_shutdown.py: once the control plane stops, new requests are refused without
entering Django, requests in progress are released, and a process that still has threads
left exits at its deadline."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

from backend.asgi_aborts import ABORTED_SCOPE_KEY, AbortSignal, abort_all, in_progress
from backend.asgi_shutdown import ERROR_CODE, StopGate, drained


class Recorder:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1


def test_the_gate_passes_requests_until_stopped_then_answers_503_without_the_app():
    app = Recorder()
    gate = StopGate(app)
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "websocket.connect"}

    async def main():
        await gate({"type": "http"}, receive, send)
        assert app.calls == 1 and not sent
        gate.stop()
        await gate({"type": "http"}, receive, send)
        await gate({"type": "websocket"}, receive, send)

    asyncio.run(main())
    assert app.calls == 1  # neither request reached the application
    start, body, close = sent
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"retry-after"] == b"1" and headers[b"connection"] == b"close"
    assert json.loads(body["body"])["error_code"] == ERROR_CODE
    assert close == {"type": "websocket.close", "code": 1001}


def test_abort_all_releases_every_request_in_progress_and_drained_waits_for_them():
    events: list[threading.Event] = []

    async def view(scope, receive, send):
        event = scope[ABORTED_SCOPE_KEY]
        events.append(event)
        await asyncio.to_thread(event.wait, 5.0)  # a long poll in a view's thread

    async def never():
        await asyncio.sleep(10)

    async def main():
        tasks = [
            asyncio.ensure_future(AbortSignal(view)({"type": "http"}, never, None))
            for _ in range(3)
        ]
        await asyncio.sleep(0.05)
        assert in_progress() == 3
        started = time.monotonic()
        assert abort_all() == 3
        assert await drained(2.0) == 0
        assert time.monotonic() - started < 1.0
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert all(e.is_set() for e in events) and in_progress() == 0


STUCK = """
import logging, threading, time
logging.basicConfig(level=logging.INFO)
from backend.asgi_shutdown import StopDeadline
threading.Thread(target=threading.Event().wait).start()  # never ends, not a daemon
StopDeadline(deadline_s=0.5).arm()
print("armed", flush=True)
"""


def test_the_deadline_ends_a_process_whose_threads_never_finish():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=20)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "armed" in done.stdout
    assert "still running at the stop deadline" in done.stderr
    assert "threading.py" in done.stderr  # the stuck thread's stack is logged
    assert took < 10
