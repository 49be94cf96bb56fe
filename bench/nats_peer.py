"""NATS JetStream as a second peer: a streaming server (Go, file storage) beside Redis.

Our own ``nats-server -js`` on a spare loopback port with its store in a temporary
directory (never the machine's server on 4222), one stream ``BENCH`` (subjects ``bench.>``,
file storage). Every record is 100 bytes, as on Sluice's side. Three metrics, each in
alternating rounds (the peer, then Sluice), the median round of each side:

- ``produce.sdk.vs_nats.records_per_s``: the SDK producer (``sluice bench produce``, its
  throughput recipe, keyless, one partition, acks=1) against nats-py's JetStream
  ``publish_async`` (every message's PubAck awaited, ``publish_async_completed``), each in a
  process of its own on uvloop.
- ``consume.sdk.vs_nats.records_per_s``: the SDK consumer (``sluice bench consume``) reading
  what the produce rounds wrote from the beginning, against a nats-py pull consumer
  (``fetch`` of 1,000, no acks) reading the stream from its start; processes of their own.
- ``produce.prebuilt.vs_nats.records_per_s``: the pre-built produce (bench/pipelined.py,
  the broker's ingest ceiling) against a protocol-level pipelined publisher: raw NATS
  ``PUB`` commands with a reply subject on the same number of connections, each writing as
  many records per write as Sluice's connection carries (``DEPTH`` batches) and reading
  every PubAck before the next write (``_PipelinedPublisher``).

``SLUICE_BENCH_SMOKE=1`` shrinks it to seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.report import Metric
from bench.smoke import smoke

REPO = Path(__file__).resolve().parents[1]
STREAM = "BENCH"
VALUE = b"v" * 100
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def nats_server() -> Iterator[int]:
    """A throwaway JetStream server (file store in a temporary directory); its port."""
    port = free_port()
    store = tempfile.mkdtemp(prefix="sluice-bench-nats-")
    proc = subprocess.Popen(
        [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    if s.recv(4096).startswith(b"INFO "):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("nats-server did not start")
            time.sleep(0.05)
        asyncio.run(_create_stream(port))
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(store, ignore_errors=True)


async def _create_stream(port: int) -> None:
    import nats
    from nats.js.api import StorageType, StreamConfig

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        await nc.jetstream().add_stream(
            StreamConfig(name=STREAM, subjects=["bench.>"], storage=StorageType.FILE)
        )
    finally:
        await nc.close()


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------------------------------
# nats-py client processes (``python -m bench.nats_peer publish|consume PORT COUNT``)


async def publish_worker(port: int, count: int) -> dict:
    """JetStream async publish of ``count`` 100-byte messages, every PubAck awaited."""
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        await (await js.publish_async("bench.sdk", VALUE))  # warm: the reply subscription
        cpu0 = _cpu()
        start = time.perf_counter()
        publish = js.publish_async
        futures = [await publish("bench.sdk", VALUE) for _ in range(count)]
        await js.publish_async_completed()
        elapsed = time.perf_counter() - start
        failed = sum(1 for f in futures if f.exception() is not None)
        return {
            "records": count,
            "failed": failed,
            "seconds": elapsed,
            "cpu_s": _cpu() - cpu0,
        }
    finally:
        await nc.close()


async def consume_worker(port: int, count: int) -> dict:
    """A pull consumer from the stream's first message until ``count`` have arrived."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        sub = await js.pull_subscribe(
            "bench.sdk",
            stream=STREAM,
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
        )
        cpu0 = _cpu()
        start = time.perf_counter()
        got = 0
        nbytes = 0
        while got < count:
            msgs = await sub.fetch(min(1000, count - got), timeout=10)
            got += len(msgs)
            nbytes += sum(len(m.data) for m in msgs)
        elapsed = time.perf_counter() - start
        return {"records": got, "bytes": nbytes, "seconds": elapsed, "cpu_s": _cpu() - cpu0}
    finally:
        await nc.close()


def _worker(*args: str, timeout: float) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.nats_peer", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.nats_peer {args[0]} failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------
# The protocol-level pipelined publisher


def pub_commands(subject: bytes, inbox: bytes, payload: bytes, n: int) -> bytes:
    """``n`` NATS PUB commands of ``payload`` to ``subject``, replies to ``inbox``."""
    return (b"PUB %s %s %d\r\n%s\r\n" % (subject, inbox, len(payload), payload)) * n


def count_acks(buffer: bytes | bytearray) -> tuple[int, bool]:
    """(JetStream PubAck messages in ``buffer``, whether any is an error or -ERR)."""
    failed = b'"error"' in buffer or b"-ERR" in buffer
    return buffer.count(b"MSG "), failed


class _PipelinedPublisher(asyncio.Protocol):
    """One connection: CONNECT, SUB to its inbox, then ``per_write`` PUBs in one write and
    every PubAck read before the next write, until the deadline."""

    def __init__(self, per_write: int, deadline: float, done: asyncio.Future, sid: int):
        self.inbox = b"_INBOX.bench.%d" % sid
        self.commands = pub_commands(b"bench.p", self.inbox, VALUE, per_write)
        self.per_write = per_write
        self.deadline = deadline
        self.done = done
        self.buffer = bytearray()
        self.acked = 0
        self.transport: asyncio.Transport | None = None
        self.connected = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        if b"PING\r\n" in buf:
            self.transport.write(b"PONG\r\n")
            buf[:] = buf.replace(b"PING\r\n", b"")
        if not self.connected:
            if b"\r\n" not in buf:
                return
            self.connected = True
            buf.clear()
            self.transport.write(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":false}\r\n'
                b"SUB %s 1\r\n" % self.inbox + self.commands
            )
            return
        if not buf.endswith(b"\r\n"):
            return
        acks, failed = count_acks(buf)
        if failed:
            self._finish(RuntimeError(f"publish failed: {bytes(buf[:300])!r}"))
            return
        if acks < self.per_write:
            return
        if acks > self.per_write:
            self._finish(RuntimeError(f"{acks} PubAcks for {self.per_write} publishes"))
            return
        buf.clear()
        self.acked += acks
        if time.perf_counter() < self.deadline:
            self.transport.write(self.commands)
        else:
            self._finish(None)

    def _finish(self, error: Exception | None) -> None:
        if not self.done.done():
            if error is None:
                self.done.set_result(self.acked)
            else:
                self.done.set_exception(error)
        self.transport.close()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(exc or RuntimeError("nats-server closed the connection"))


def pipelined_publish(port: int, seconds: float, connections: int, per_write: int) -> tuple:
    """(records/s, the client's share of a core) of ``connections`` pipelined publishers."""
    import uvloop

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        cpu0 = _cpu()
        start = time.perf_counter()
        dones = []
        for sid in range(connections):
            done = loop.create_future()
            await loop.create_connection(
                lambda done=done, sid=sid: _PipelinedPublisher(
                    per_write, start + seconds, done, sid
                ),
                "127.0.0.1",
                port,
            )
            dones.append(done)
        acked = sum(await asyncio.gather(*dones))
        elapsed = time.perf_counter() - start
        return acked / elapsed, (_cpu() - cpu0) / elapsed

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())


# ---------------------------------------------------------------------------------------
# The harness side


def run(quick: bool = False) -> list[Metric]:
    from bench.broker import (
        PREBUILT_CONNECTIONS,
        PREBUILT_DEPTH,
        SDK_THROUGHPUT_RECIPE,
        _sluice_bench,
        prebuilt_run,
        start_broker,
    )
    from bench.storage import make_batch

    rounds, count, seconds = (3, 200_000, 1.0) if quick else (3, 1_000_000, 3.0)
    if smoke():
        rounds, count, seconds = 1, 20_000, 0.5
    per_write = PREBUILT_DEPTH * make_batch()[1]  # the records one Sluice write carries
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-nats-"))
    produce: list[tuple[dict, dict]] = []
    consume: list[tuple[dict, dict]] = []
    ceiling: list[tuple[tuple, tuple]] = []
    try:
        broker = start_broker(base / "b", {"nsdk": (1, {}), "bench": (1, {})})
        try:
            with nats_server() as port:
                timeout = 600
                for _ in range(rounds):
                    peer = _worker("publish", str(port), str(count), timeout=timeout)
                    ours = _sluice_bench(
                        broker,
                        *("produce", "nsdk", "--count", str(count), "--record-size", "100"),
                        *("--keys", "0", "--acks", "1", *SDK_THROUGHPUT_RECIPE),
                    )
                    produce.append((peer, ours))
                for _ in range(rounds):
                    peer = _worker("consume", str(port), str(count), timeout=timeout)
                    ours = _sluice_bench(
                        broker, "consume", "nsdk", "--count", str(count), "--loop", "uvloop"
                    )
                    consume.append((peer, ours))
                pipelined_publish(port, 0.5, PREBUILT_CONNECTIONS, per_write)  # warm
                prebuilt_run(broker, 0.5, PREBUILT_CONNECTIONS, PREBUILT_DEPTH)
                for _ in range(rounds):
                    peer = pipelined_publish(port, seconds, PREBUILT_CONNECTIONS, per_write)
                    rate, result = prebuilt_run(
                        broker, seconds, PREBUILT_CONNECTIONS, PREBUILT_DEPTH
                    )
                    ceiling.append((peer, (rate, result.client_busy)))
        finally:
            broker.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    failed = sum(p["failed"] for p, _ in produce) + sum(o["failed"] for _, o in produce)
    if failed:
        raise RuntimeError(f"{failed} records were not acknowledged")
    return _metrics(rounds, count, seconds, per_write, produce, consume, ceiling)


def _rate(peer: dict) -> float:
    return peer["records"] / peer["seconds"]


def _metrics(rounds, count, seconds, per_write, produce, consume, ceiling) -> list[Metric]:
    from bench.broker import PREBUILT_CONNECTIONS, PREBUILT_DEPTH

    def each(pairs) -> str:
        joined = ", ".join(f"{o / 1000:.0f}k vs {p / 1000:.0f}k" for p, o in pairs)
        return f"records/s, Sluice vs NATS: {joined}"

    prod = [(_rate(p), o["records_per_s"]) for p, o in produce]
    cons = [(_rate(p), o["records_per_s"]) for p, o in consume]
    ceil = [(p[0], o[0]) for p, o in ceiling]
    nats_cpu = statistics.median(p["cpu_s"] / p["seconds"] for p, _ in produce)
    nats_consume_cpu = statistics.median(p["cpu_s"] / p["seconds"] for p, _ in consume)
    return [
        Metric(
            name="produce.sdk.vs_nats.records_per_s",
            value=round(statistics.median(o for _, o in prod)),
            unit="records/s",
            better="higher",
            workload=(
                f"Python SDK AsyncProducer (sluice bench produce, its own process, the SDK's "
                f"throughput recipe: WebSocket produce, uvloop), {count:,} keyless 100-byte "
                f"records to one partition, acks=1; median of {rounds} rounds alternating "
                f"with the peer"
            ),
            rounds=each(prod),
            peer=(
                f"nats-py JetStream publish_async of as many 100-byte messages (every PubAck "
                f"awaited), its own process on uvloop, to our own nats-server -js, stream "
                f"with file storage; client CPU {nats_cpu:.0%} of a core (median round)"
            ),
            peer_value=round(statistics.median(p for p, _ in prod)),
        ),
        Metric(
            name="consume.sdk.vs_nats.records_per_s",
            value=round(statistics.median(o for _, o in cons)),
            unit="records/s",
            better="higher",
            workload=(
                f"Python SDK AsyncConsumer (sluice bench consume, its own process, uvloop, "
                f"long-poll fetch) reading {count:,} 100-byte records of one partition from "
                f"the beginning; median of {rounds} rounds alternating with the peer"
            ),
            rounds=each(cons),
            peer=(
                f"nats-py pull consumer (fetch of 1,000, ack policy none) reading as many "
                f"messages of the file-backed stream from its start, its own process; client "
                f"CPU {nats_consume_cpu:.0%} of a core (median round)"
            ),
            peer_value=round(statistics.median(p for p, _ in cons)),
        ),
        Metric(
            name="produce.prebuilt.vs_nats.records_per_s",
            value=round(statistics.median(o for _, o in ceil)),
            unit="records/s",
            better="higher",
            workload=(
                f"produce.prebuilt's client and bodies (the broker's ingest ceiling: "
                f"{PREBUILT_CONNECTIONS} connections, {PREBUILT_DEPTH} 16 KiB batches per "
                f"write, acks=1); median of {rounds} rounds of {seconds:g} s alternating with "
                f"the peer; client CPU "
                f"{statistics.median(o[1] for _, o in ceiling):.0%} of a core"
            ),
            rounds=each(ceil),
            peer=(
                f"a protocol-level pipelined NATS publisher (raw sockets, uvloop): "
                f"{PREBUILT_CONNECTIONS} connections, each writing {per_write:,} PUBs of "
                f"100 bytes with a reply subject (the records one Sluice write carries) and "
                f"reading every JetStream PubAck before the next write, to our own "
                f"nats-server -js, file-backed stream; client CPU "
                f"{statistics.median(p[1] for p, _ in ceiling):.0%} of a core"
            ),
            peer_value=round(statistics.median(p for p, _ in ceil)),
        ),
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nats_peer")
    parser.add_argument("role", choices=("publish", "consume"))
    parser.add_argument("port", type=int)
    parser.add_argument("count", type=int)
    a = parser.parse_args(argv)
    import uvloop

    worker = publish_worker if a.role == "publish" else consume_worker
    print(json.dumps(uvloop.run(worker(a.port, a.count))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
