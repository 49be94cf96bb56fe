"""A broker's stop has a hard upper bound (infra/README.md, "How long a stop takes").

Each phase of a stop is bounded on its own (the controlled shutdown, the request drain, the
close of the logs), but a thread that never returns (a hung disk's fsync, a library's
non-daemon thread) would still keep the process alive, and the interpreter's exit waits for
every such thread. ``arm`` starts a daemon timer when the stop begins; if the process is
still alive when it fires, it logs what each thread is doing and exits with
``EXIT_STOP_DEADLINE``. The logs then have no clean-shutdown markers, so the next start
recovers them, as after a crash.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback

logger = logging.getLogger("sluice.broker")

EXIT_STOP_DEADLINE = 4
CLOSE_ALLOWANCE_S = 15.0  # flushing and closing every log, after the drain


def bound_s(controlled_shutdown_s: float, drain_s: float) -> float:
    """The hard bound: the controlled shutdown's and the drain's own timeouts, then the
    close (50 s with the defaults; a stop normally takes a few seconds)."""
    return controlled_shutdown_s + drain_s + CLOSE_ALLOWANCE_S


def _threads() -> str:
    me = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame, limit=8))
        for ident, frame in sys._current_frames().items()
        if ident != me
    )


def arm(seconds: float) -> threading.Thread:
    """Exit the process ``seconds`` from now unless it has exited by then."""

    def fire() -> None:
        time.sleep(seconds)
        logger.error(
            "still running %.0f s after the stop began; exiting now (the next start recovers "
            "the logs). Threads left:\n%s",
            seconds,
            _threads(),
        )
        logging.shutdown()
        os._exit(EXIT_STOP_DEADLINE)

    timer = threading.Thread(target=fire, name="sluice-stop-deadline", daemon=True)
    timer.start()
    return timer
