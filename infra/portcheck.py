"""Is a TCP port free to listen on, and if not, which program holds it (Linux ``/proc``).

``make up`` checks its ports before starting anything, so a port held by a leftover process
or another program is named with its holder instead of surfacing as a child's "address
already in use". The check binds as the servers do, with SO_REUSEADDR, so a port whose old
connections are only in TIME_WAIT counts as free (Twisted and the brokers set it too).
"""

from __future__ import annotations

import contextlib
import os
import socket

LISTEN = "0A"  # the state column of /proc/net/tcp


def free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)  # the header
            for line in f:
                cols = line.split()
                if (
                    len(cols) > 9
                    and cols[3] == LISTEN
                    and int(cols[1].rsplit(":", 1)[1], 16) == port
                ):
                    inodes.add(cols[9])
    return inodes


def holder(port: int) -> str | None:
    """``"pid 123 (python -m brokernodes ...)"`` for the process listening on ``port``, when
    this user can see it; None otherwise."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in targets:
                    return f"pid {pid} ({_cmdline(pid)})"
    return None


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words)
    return text if len(text) <= 120 else text[:117] + "..."
