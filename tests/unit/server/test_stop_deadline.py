"""brokernodes/server/stop_deadline.py: a broker process whose stop hangs (a thread that
never returns) exits at its hard bound with EXIT_STOP_DEADLINE, naming the stuck thread."""

from __future__ import annotations

import subprocess
import sys
import time

from brokernodes.server.stop_deadline import EXIT_STOP_DEADLINE, bound_s

HANGS = """
import logging, threading
logging.basicConfig(level=logging.INFO)
from brokernodes.server import stop_deadline
threading.Thread(target=threading.Event().wait, name="hung-fsync").start()  # not a daemon
stop_deadline.arm(0.5)
"""


def test_a_hung_stop_ends_at_the_deadline_with_its_own_exit_code():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HANGS], capture_output=True, text=True, timeout=20)
    assert done.returncode == EXIT_STOP_DEADLINE, done.stderr
    assert "thread hung-fsync" in done.stderr and "next start recovers" in done.stderr
    assert time.monotonic() - started < 10


def test_the_bound_is_the_phases_own_timeouts_plus_the_close():
    assert bound_s(30.0, 5.0) == 50.0
