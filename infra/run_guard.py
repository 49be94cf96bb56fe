"""The runner's guard: stops ``make up``'s processes when the runner dies without doing so.

``infra/run_local.py`` starts this first, in a session of its own (a terminal's Ctrl-C and a
kill of the runner's process group do not reach it), with a pipe as its stdin whose only
writer is the runner. When the runner ends, however it ends (even SIGKILL), the kernel closes
that pipe, the read below returns, and the guard stops whatever the runner recorded in
``--children`` that is still running, in the runner's own order and bounds
(``process_tree.stop_in_order``). After a clean stop nothing is left and it exits at once.

Why not PR_SET_PDEATHSIG on each child: it would send every child SIGTERM at the same
moment, and the brokers' controlled shutdowns need the control plane up while they stop
one at a time.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import process_tree


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--children", required=True, help="the runner's children.json")
    a = p.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns when the runner's end of the pipe closes

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} guard: {text}", flush=True)

    _, children = process_tree.read(Path(a.children))
    left = [c for c in children if process_tree.running(c)]
    if not left:
        return 0
    say(
        "the runner ended without stopping "
        + ", ".join(f"{c.name} (pid {c.pid})" for c in left)
        + "; stopping them"
    )
    started = time.monotonic()
    process_tree.stop_in_order(left, say)
    say(f"stopped in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
