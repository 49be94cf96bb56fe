"""Redis Streams as the peer: our own redis-server on a spare loopback port, measured in the
same run as Sluice (see ../shared/BENCH.md). Never touches the machine's Redis on 6379."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator

import redis

VALUE = b"v" * 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server(appendfsync: str | None = None) -> Iterator[int]:
    """Start a throwaway redis-server on a free port; yield the port. No persistence, or
    with ``appendfsync`` ("always": every write command fsynced to the append-only file
    before its reply) an AOF in a temporary directory."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="sluice-bench-redis-")
    persistence = (
        ["--appendonly", "yes", "--appendfsync", appendfsync]
        if appendfsync
        else ["--appendonly", "no"]
    )
    proc = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            *persistence,
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


def benchmark_xadd(port: int, requests: int, pipeline: int = 64, clients: int = 50) -> float:
    """redis-benchmark (C) XADD of 100-byte values, pipelined; records (requests) per second."""
    out = subprocess.run(
        [
            "redis-benchmark",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-n",
            str(requests),
            "-P",
            str(pipeline),
            "-c",
            str(clients),
            "--csv",
            "XADD",
            "bench",
            "*",
            "v",
            VALUE.decode(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith('"XADD')]
    if not rows:
        raise RuntimeError(f"cannot read redis-benchmark output: {out!r}")
    return float(re.findall(r'"([0-9.]+)"', rows[-1])[0])


def redis_py_xadd(port: int, records: int, per_round_trip: int = 1000) -> float:
    """redis-py (hiredis parser) pipelined XADD, ``per_round_trip`` per pipeline; records/s."""
    client = redis.Redis(port=port)
    client.delete("pybench")
    start = time.perf_counter()
    sent = 0
    while sent < records:
        pipe = client.pipeline(transaction=False)
        for _ in range(min(per_round_trip, records - sent)):
            pipe.xadd("pybench", {"v": VALUE})
        pipe.execute()
        sent += per_round_trip
    return records / (time.perf_counter() - start)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 100 else max(values)


if __name__ == "__main__":
    with redis_server() as port:
        print("redis-benchmark XADD -P 64:", round(benchmark_xadd(port, 300_000)))
        print("redis-py pipelined XADD:", round(redis_py_xadd(port, 100_000)))
