"""The processes ``make up`` started, recorded on disk, and stopping them in order.

The runner writes every child it starts to ``<var>/run/children.json`` (name, pid, the
kernel's start time of that pid, its stop bound). Three callers stop them with
``stop_in_order``, so a stop looks the same whoever does it:

- the runner itself on Ctrl-C or SIGTERM;
- its guard (``infra/run_guard.py``) when the runner dies without stopping them (kill -9);
- the next ``make up``, when an earlier one's processes are still running (both the runner
  and its guard were killed).

The order: brokers one at a time (each controlled shutdown moves leadership to brokers that
stay up, while the control plane still answers), then everything else together; each
process gets SIGTERM and its bound, then SIGKILL to its whole process group (every child is
a session leader). A pid is only signalled while its start time is the recorded one, so a
pid the kernel has since reused for something else is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

BROKER_PREFIX = "broker"


@dataclass(frozen=True)
class Child:
    name: str
    pid: int
    started: int  # /proc/<pid>/stat field 22: start time in clock ticks since boot
    stop_s: float  # SIGTERM, then SIGKILL after this long


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (None: no such process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return int(fields[19])


def record(name: str, pid: int, stop_s: float) -> Child:
    started = start_time(pid)
    return Child(name, pid, started if started is not None else -1, stop_s)


def running(child: Child) -> bool:
    """Still the process that was recorded, and not a zombie."""
    return child.started >= 0 and start_time(child.pid) == child.started


def write(path: Path, runner: Child | None, children: list[Child]) -> None:
    """Record the runner and its children (atomically: a reader sees all or the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "runner": asdict(runner) if runner else None,
        "children": [asdict(c) for c in children],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def read(path: Path) -> tuple[Child | None, list[Child]]:
    """The recorded runner and children; nothing for a missing or unreadable file."""
    try:
        doc = json.loads(path.read_text())
        runner = Child(**doc["runner"]) if doc.get("runner") else None
        return runner, [Child(**c) for c in doc.get("children", [])]
    except (OSError, ValueError, TypeError, KeyError):
        return None, []


def _signal(child: Child, sig: int) -> None:
    if not running(child):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sig == signal.SIGKILL:
            os.killpg(child.pid, sig)  # the process and anything it started in its group
        else:
            os.kill(child.pid, sig)


def stop_in_order(
    children: list[Child],
    say: Callable[[str], None],
    reap: Callable[[], None] = lambda: None,
) -> list[str]:
    """Stop ``children`` in the module docstring's order; returns the names that had to be
    killed. ``reap`` is called while waiting (a parent collects its zombies there)."""
    brokers = [c for c in children if c.name.startswith(BROKER_PREFIX)]
    others = [c for c in children if not c.name.startswith(BROKER_PREFIX)]
    killed: list[str] = []
    groups = [[b] for b in brokers] + ([others] if others else [])
    for group in groups:
        for c in group:
            _signal(c, signal.SIGTERM)
        deadline = time.monotonic() + max(c.stop_s for c in group)
        for c in group:
            own = min(deadline, time.monotonic() + c.stop_s)
            while running(c) and time.monotonic() < own:
                reap()
                time.sleep(0.05)
            if running(c):
                say(f"{c.name} did not stop within {c.stop_s:g} s; killing it")
                _signal(c, signal.SIGKILL)
                killed.append(c.name)
        for _ in range(100):  # a killed process is gone within moments (bounded)
            reap()
            if not any(running(c) for c in group):
                break
            time.sleep(0.05)
    return killed
