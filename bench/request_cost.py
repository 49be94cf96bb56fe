"""The broker's CPU per small Kafka request: ``python -m bench.request_cost [-n N]``.

One real broker process (started as bench/kafka.py starts it: ``harness.broker``'s launcher,
a Kafka listener with SASL/PLAIN) and one client process speaking the Kafka protocol over
plain sockets with the project's own codecs, one request at a time, as a librdkafka producer
with linger.ms 0 sends them:

- produce: ``N`` Produce requests (the newest version, acks=1), each one RecordBatch v2 of one
  100-byte record to partition 0, each answered before the next is sent;
- fetch: ``N`` Fetch requests (the newest version, topic ids, max wait 1 s, min bytes 1) for
  the next offset of another partition; each is parked in the broker's long poll, then a
  Produce of one record (on a second connection) wakes it.

The broker's CPU (user + system of every thread, ``/proc/<pid>/stat``) is read before and
after each phase; its idle rate (measured before the phases, over ``IDLE_S``) times the
phase's wall time is subtracted. ``broker_cpu_us_per_request`` is produce: the produce
phase's CPU / N; fetch: (the fetch phase's CPU - N x the produce figure) / N (the wake-up
belongs to the fetch). CPU per request holds on a loaded machine; the wall-clock figures
printed beside it (requests/s, the wake latency from the produce's send to the fetch's
answer) do not. ``--profile DIR`` records the broker with py-spy during both phases.

``--in-flight K`` (K > 1) adds a third phase after them, reported on its own as
``produce_pipelined``: ``N`` of the same Produce requests with up to K unanswered on the one
connection (the next is sent before the oldest answer is read), as librdkafka keeps up to
``max.in.flight`` of them; its CPU / N, the broker's pipelined path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VALUE_BYTES = 100
IDLE_S = 1.0
WARMUP = 200  # requests of each kind before the measured phases
PRODUCE_TOPIC = "rc-produce"
FETCH_TOPIC = "rc-fetch"
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")


# ---------------------------------------------------------------------------------------
# The client process (``python -m bench.request_cost client <host:port>``).


class Conn:
    """One blocking Kafka connection: framed requests, one in flight at a time."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def send(self, api_key: int, version: int, body: dict) -> tuple[int, int]:
        from brokernodes.server.protocol.kafka import apis

        api = apis.apis()[api_key]
        self.correlation += 1
        head = bytearray(_HEAD.pack(api_key, version, self.correlation))
        head += b"\x00\x05bench"  # client id (a non-compact string in both header versions)
        if api.flexible(version):
            head.append(0)  # request header v2: no tagged fields
        out = apis.request_codec(api_key, version).encode_new(body)
        frame = bytes(head) + bytes(out)
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        return api_key, version

    def receive(self, sent: tuple[int, int]) -> dict:
        from brokernodes.server.protocol.kafka import apis

        api_key, version = sent
        (size,) = _SIZE.unpack(self._exactly(4))
        frame = self._exactly(size)
        pos = 4  # the correlation id
        if apis.apis()[api_key].flexible(version) and api_key != apis.API_VERSIONS:
            pos += 1  # response header v1: an empty tagged-field section
        return apis.response_codec(api_key, version).decode(memoryview(frame)[pos:], 0)[0]

    def call(self, api_key: int, version: int, body: dict) -> dict:
        return self.receive(self.send(api_key, version, body))

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def _connect(address: str) -> Conn:
    """A connection authenticated with SASL/PLAIN (SaslHandshake v1, SaslAuthenticate v2)."""
    from brokernodes.server.protocol.kafka import apis
    from harness.broker import KEY_ID, SECRET

    conn = Conn(address)
    answer = conn.call(apis.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    if answer["error_code"]:
        raise RuntimeError(f"SaslHandshake failed: {answer}")
    token = b"\x00" + KEY_ID.encode() + b"\x00" + SECRET.encode()
    answer = conn.call(apis.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    if answer["error_code"]:
        raise RuntimeError(f"SaslAuthenticate failed: {answer}")
    return conn


class Client:
    """The producer and consumer connections and the requests the phases send."""

    def __init__(self, address: str) -> None:
        from brokernodes.records.batch import Record, encode_batch
        from brokernodes.server.protocol.kafka import apis

        self.apis = apis
        self.produce_version = produce_version()
        self.fetch_version = fetch_version()
        self.producer = _connect(address)
        self.consumer = _connect(address)
        query = {"topics": [{"name": FETCH_TOPIC}], "allow_auto_topic_creation": False}
        meta = self.producer.call(apis.METADATA, 12, query)
        self.fetch_topic_id = meta["topics"][0]["topic_id"]
        self.batch = encode_batch([Record(int(time.time() * 1000), None, b"v" * VALUE_BYTES)])
        self.fetch_offset = 0

    def produce(self, topic: str) -> tuple[int, int]:
        data = [{"index": 0, "records": self.batch}]
        body = {
            "acks": 1,
            "timeout_ms": 30_000,
            "topic_data": [{"name": topic, "partition_data": data}],
        }
        return self.producer.send(self.apis.PRODUCE, self.produce_version, body)

    def produced(self, sent: tuple[int, int]) -> None:
        answer = self.producer.receive(sent)
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        if code:
            raise RuntimeError(f"produce answered error {code}")

    def produce_one(self) -> None:
        self.produced(self.produce(PRODUCE_TOPIC))

    def fetch_one(self, park_s: float) -> float:
        """One long-poll Fetch woken by a produce; the wake latency (s)."""
        topic = {
            "topic": FETCH_TOPIC,
            "topic_id": self.fetch_topic_id,
            "partitions": [
                {"partition": 0, "fetch_offset": self.fetch_offset, "partition_max_bytes": 1 << 20}
            ],
        }
        body = {
            "max_wait_ms": 1000,
            "min_bytes": 1,
            "max_bytes": 50 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [topic],
        }
        sent = self.consumer.send(self.apis.FETCH, self.fetch_version, body)
        time.sleep(park_s)  # let the broker read the fetch and park it
        woke = time.perf_counter()
        self.produced(self.produce(FETCH_TOPIC))
        answer = self.consumer.receive(sent)
        latency = time.perf_counter() - woke
        part = answer["responses"][0]["partitions"][0]
        if part["error_code"] or not part["records"]:
            raise RuntimeError(f"the fetch answered no record: {part}")
        self.fetch_offset += 1
        return latency


def client_main(address: str) -> int:
    """Serve the harness's commands from stdin: ``warm``, ``produce N``, ``fetch N``;
    one JSON line on stdout after each."""
    client = Client(address)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        start = time.perf_counter()
        out: dict = {}
        if command == "warm":
            for _ in range(int(args[0])):
                client.produce_one()
                client.fetch_one(0.0002)
        elif command == "produce":
            for _ in range(int(args[0])):
                client.produce_one()
        elif command == "pipelined":
            in_flight: list[tuple[int, int]] = []
            for _ in range(int(args[0])):
                in_flight.append(client.produce(PRODUCE_TOPIC))
                if len(in_flight) >= int(args[1]):
                    client.produced(in_flight.pop(0))
            for sent in in_flight:
                client.produced(sent)
        elif command == "fetch":
            latencies = [client.fetch_one(0.0002) for _ in range(int(args[0]))]
            cuts = statistics.quantiles(latencies, n=100)
            out = {"wake_p50_ms": cuts[49] * 1e3, "wake_p99_ms": cuts[98] * 1e3}
        else:
            raise SystemExit(f"unknown command {command!r}")
        print(json.dumps({"seconds": time.perf_counter() - start, **out}), flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# The harness side.


def cost_topics() -> dict[str, tuple[int, dict[str, str]]]:
    """The topics the phases use (one partition each), for a broker started elsewhere."""
    return {PRODUCE_TOPIC: (1, {}), FETCH_TOPIC: (1, {})}


def produce_version() -> int:
    from brokernodes.server.protocol.kafka import apis

    return apis.apis()[apis.PRODUCE].max_version


def fetch_version() -> int:
    from brokernodes.server.protocol.kafka import apis

    return apis.apis()[apis.FETCH].max_version


class _Session:
    """The client process, driven line by line."""

    def __init__(self, bootstrap: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.request_cost", "client", bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        self._line()

    def _line(self) -> dict:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the request_cost client exited ({self.proc.wait()})")
        return json.loads(line)

    def run(self, command: str) -> dict:
        self.proc.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self._line()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def _py_spy(pid: int, out: Path | None, name: str):
    """py-spy recording the broker while the block runs (nothing when ``out`` is None)."""
    if out is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [spy, "record", "--native", "--rate", "500", "--format", "raw",
         "-o", str(out / f"{name}.txt"), "--pid", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        proc.send_signal(2)  # SIGINT: py-spy writes its file and exits
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(broker, n: int, profile: Path | None = None, in_flight: int = 1) -> dict:
    """Both phases against a running broker (``broker.pid``, ``broker.bootstrap``), and the
    pipelined one when ``in_flight`` > 1."""
    from bench.broker import cpu_seconds

    session = _Session(broker.bootstrap)
    try:
        session.run(f"warm {WARMUP}")
        cpu0, wall0 = cpu_seconds(broker.pid), time.monotonic()
        time.sleep(IDLE_S)
        idle = (cpu_seconds(broker.pid) - cpu0) / (time.monotonic() - wall0)

        def phase(command: str) -> tuple[float, dict]:
            with _py_spy(broker.pid, profile, command.split()[0]):
                cpu, wall = cpu_seconds(broker.pid), time.monotonic()
                out = session.run(command)
                cpu = cpu_seconds(broker.pid) - cpu
                cpu -= idle * (time.monotonic() - wall)
            return cpu, out

        produce_cpu, produce_out = phase(f"produce {n}")
        fetch_cpu, fetch_out = phase(f"fetch {n}")
        pipelined = phase(f"pipelined {n} {in_flight}") if in_flight > 1 else None
    finally:
        session.close()
    produce_us = produce_cpu / n * 1e6
    fetch_us = (fetch_cpu / n * 1e6) - produce_us
    extra = {}
    if pipelined is not None:
        extra["produce_pipelined"] = {
            "in_flight": in_flight,
            "broker_cpu_us_per_request": round(pipelined[0] / n * 1e6, 1),
            "requests_per_s": round(n / pipelined[1]["seconds"]),
        }
    return {
        "requests": n,
        "produce": {
            "broker_cpu_us_per_request": round(produce_us, 1),
            "requests_per_s": round(n / produce_out["seconds"]),
        },
        "fetch": {
            "broker_cpu_us_per_request": round(fetch_us, 1),
            "wake_p50_ms": round(fetch_out["wake_p50_ms"], 3),
            "wake_p99_ms": round(fetch_out["wake_p99_ms"], 3),
        },
        **extra,
        "broker_idle_cpu_share": round(idle, 4),
    }


@contextlib.contextmanager
def broker_with_kafka(extra_topics: dict | None = None):
    """One broker process with a Kafka listener and the tool's topics (and ``extra_topics``)."""
    from harness.broker import BrokerLauncher

    base = Path(tempfile.mkdtemp(prefix="sluice-bench-rc-"))
    launcher = BrokerLauncher(base)
    try:
        yield launcher({**cost_topics(), **(extra_topics or {})}, kafka=True)
    finally:
        with contextlib.suppress(Exception):
            launcher.close()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["client"]:
        return client_main(argv[1])
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__)
    parser.add_argument("-n", type=int, default=10_000, help="requests per phase")
    parser.add_argument("--profile", type=Path, help="py-spy raw profiles into this directory")
    parser.add_argument(
        "--in-flight", type=int, default=1, help="also a pipelined produce phase (K > 1)"
    )
    a = parser.parse_args(argv)
    with broker_with_kafka() as broker:
        print(json.dumps(measure(broker, a.n, a.profile, a.in_flight), indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
