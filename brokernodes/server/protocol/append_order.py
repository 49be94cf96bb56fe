"""A request's signal that its appends are made and only its wait remains.

Why: a pipelining client's produce requests on one connection must be appended in the order
sent, but what follows an append (the group commit's fsync, an acks=all wait for the ISR)
can overlap with the next request's append, so that one fsync covers several requests of
the same connection. The connection that runs a request sets ``on_appended`` (a context
variable: the handler's task and anything it spawns see it) to a callback; the partition
calls ``appended()`` once its append lock is released, and the connection may then start
the next request. A request that never appends here (an error, a forward to the leader)
only releases the next one when it is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["appended", "on_appended"]

on_appended: ContextVar[Callable[[], None] | None] = ContextVar("on_appended", default=None)


def appended() -> None:
    """This request's appends are in the log (or refused): the next request may start."""
    callback = on_appended.get()
    if callback is not None:
        on_appended.set(None)  # once per request
        callback()
