"""The fault suite's ``LinkProxy`` (tests/faults/proxy.py) as a process of its own that adds
a fixed delay to every chunk both ways: brokers on one machine, spaced as machines in one
zone would be (this kernel has no ``tc netem``).

A process of its own so that its CPU is neither the client's nor the harness's, and can be
reported: ``python -m bench.delay_proxy SECONDS PORT...`` prints one line with a proxy port
per upstream port, then forwards until its standard input closes.

The proxy sleeps ``SECONDS`` per chunk on its event loop's timer. asyncio's default
selector (epoll) waits in whole milliseconds, which would turn 0.2 ms into about 1 ms, so
this process gives the proxies a ``select``-based loop (microsecond timeouts, a handful of
sockets). ``measure_rtt_ms`` times what the proxy really adds to a round trip.
"""

from __future__ import annotations

import asyncio
import select
import selectors
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class DelayProxies:
    """``with DelayProxies(0.0002, [p1, p2]) as proxies: proxies.ports[p1]`` ..."""

    def __init__(self, latency_s: float, upstream_ports: list[int]) -> None:
        self.latency_s = latency_s
        self.upstream_ports = upstream_ports
        self.ports: dict[int, int] = {}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> DelayProxies:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.delay_proxy",
                repr(self.latency_s),
                *map(str, self.upstream_ports),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # connections cut at exit log pending tasks
            text=True,
            cwd=REPO,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        ports = [int(p) for p in line.split()]
        if len(ports) != len(self.upstream_ports):
            self.__exit__()
            raise RuntimeError(f"the delay proxy did not start: {line!r}")
        self.ports = dict(zip(self.upstream_ports, ports, strict=True))
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def measure_rtt_ms(port: int, samples: int = 50) -> float:
    """Median milliseconds of a 1-byte-each-way HTTP exchange (GET /healthz) on one
    keep-alive connection to ``port``: through a proxy minus direct is what the proxy adds."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    times = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            start = time.perf_counter()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += sock.recv(65536)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


class _FineTimers(asyncio.DefaultEventLoopPolicy):
    """Event loops on ``select``, whose timeout has microsecond resolution (epoll's has
    milliseconds): LinkProxy's sub-millisecond sleeps then last about as long as asked."""

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.SelectorEventLoop(selectors.SelectSelector())


def main(argv: list[str]) -> int:
    from tests.faults.proxy import LinkProxy

    asyncio.set_event_loop_policy(_FineTimers())  # LinkProxy calls asyncio.new_event_loop

    latency = float(argv[0])
    proxies = [LinkProxy(int(port)).start() for port in argv[1:]]
    for proxy in proxies:
        proxy.latency_s = latency
    print(" ".join(str(p.port) for p in proxies), flush=True)
    sys.stdin.read()  # until the harness closes it
    for proxy in proxies:
        proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
