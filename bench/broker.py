"""Broker benchmarks: one real broker process on loopback beside Redis Streams on loopback.

Every figure is measured in the same run as its peer (../shared/BENCH.md):

- ``produce.prebuilt.records_per_s``, the broker's ingest ceiling: one pre-built RecordBatch
  v2 body with no producer id (16 KiB batches of 100-byte values, one batch per request)
  POSTed over and over on 8 pipelined keep-alive connections (bench/pipelined.py), acks=1;
  producers with ids and sequences are bench/idempotent.py's. Peer: ``redis-benchmark``
  XADD of 100-byte values, ``-P 64``; alternating rounds, the median round of each side.
- ``produce.sdk.records_per_s``: the SDK producer, keyed 100-byte records, acks=1.
  Peer: redis-py pipelined XADD, 1000 per round trip; alternating rounds, the median round
  of each side.
- ``produce.json_rest.records_per_s``: v3 ``records:batch`` JSON, 100 records per request,
  concurrent clients. Peer: redis-py pipelined XADD; alternating rounds.
- ``fetch.zero_copy.mb_per_s``: binary fetches of a page-cached partition by one consumer
  that sends its next fetch when a response's head arrives (``Sluice-Next-Offset``).
  Peer: raw ``os.sendfile`` of the same segment file to a loopback socket.
- ``fetch.zero_copy.broker_cpu_s_per_gib``: the broker's own CPU seconds per GiB served by
  the sendfile path, beside a second broker forced to read + copy; passes alternate.
- ``e2e.p99_ms``: producer send to consumer receipt at a steady 10k records/s, the SDK's
  low-latency recipe, after a warm-up that opens the streams. Peer: Redis XADD to XREAD
  BLOCK at the same rate, producer and consumer in processes of their own with the same
  warm-up and GC handling (bench/redis_e2e.py), in alternating rounds; the median round's
  p99 on each side.

``SLUICE_BENCH_SMOKE=1`` shrinks every part to seconds (bench/smoke.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

from bench import pipelined, redis_e2e, redis_peer
from bench.report import Metric
from bench.smoke import smoke
from bench.storage import make_batch
from brokernodes.records.header import peek_batch_size, read_header
from harness.broker import BrokerProcess, free_port, make_metadata

RECORD_VALUE = b"v" * 100
E2E_ROUNDS = 5  # a quick run takes 3
SDK_ROUNDS = 3  # SDK produce rounds, each beside a redis-py round (a quick run takes 1)
BINARY = "application/vnd.kafka.recordbatch.v2"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def start_broker(workdir: Path, topics: dict, extra_args: list[str] | None = None) -> BrokerProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    doc = make_metadata(port, topics)
    metadata_path = workdir / "metadata.json"
    metadata_path.write_text(json.dumps(doc))
    broker = BrokerProcess(
        workdir=workdir,
        port=port,
        metadata_path=metadata_path,
        data_dir=workdir / "data",
        extra_args=list(extra_args or []),
        cluster_id=doc["cluster_id"],
    )
    broker.start()
    return broker


def produce_prebuilt_pipelined(
    broker: BrokerProcess, seconds: float, connections: int, depth: int
) -> float:
    """Records/s from ``connections`` pipelined connections (bench/pipelined.py) POSTing
    one pre-built 16 KiB batch per request, acks=1."""
    return prebuilt_run(broker, seconds, connections, depth)[0]


def prebuilt_run(
    broker: BrokerProcess, seconds: float, connections: int, depth: int, acks: str = "1"
) -> tuple[float, pipelined.PipelinedRun]:
    """(records/s, the run) of the pre-built produce to partition 0 of ``bench``."""
    batch, per_batch = make_batch()
    path = f"/sluice/v1/topics/bench/partitions/0/batches?acks={acks}"
    head = pipelined.request_head(broker.port, path, broker.headers["Authorization"], len(batch))
    source = pipelined.fixed(head + batch)
    result = pipelined.run(broker.port, [source] * connections, depth, seconds)
    return result.requests * per_batch / result.seconds, result


def _json_body(records: int) -> bytes:
    value = RECORD_VALUE.decode()
    entries = [
        {
            "id": str(i),
            "key": {"type": "STRING", "data": f"key-{i}"},
            "value": {"type": "STRING", "data": value},
        }
        for i in range(records)
    ]
    return json.dumps({"entries": entries}).encode()


async def _produce_json(broker: BrokerProcess, seconds: float, connections: int) -> float:
    per_request = 100
    body = _json_body(per_request)
    url = f"{broker.url}/v3/clusters/{broker.cluster_id}/topics/bench/records:batch"
    headers = {**broker.headers, "Content-Type": "application/json"}

    async def loop(session, deadline) -> int:
        sent = 0
        while time.perf_counter() < deadline:
            async with session.post(url, data=body, headers=headers) as resp:
                if resp.status != 207:
                    raise RuntimeError(f"JSON produce failed: {resp.status} {await resp.text()}")
                reply = await resp.json()
                if reply["failures"]:
                    raise RuntimeError(f"JSON produce failures: {reply['failures'][:3]}")
            sent += per_request
        return sent

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as s:
        start = time.perf_counter()
        deadline = start + seconds
        counts = await asyncio.gather(*(loop(s, deadline) for _ in range(connections)))
        return sum(counts) / (time.perf_counter() - start)


def _fill(broker: BrokerProcess, topic: str, total_bytes: int) -> int:
    """Produce ``total_bytes`` of 16 KiB batches into partition 0; returns bytes written."""
    batch, _ = make_batch()
    count = total_bytes // len(batch)
    body = batch * 64  # 64 batches per request to fill quickly
    url = f"{broker.url}/sluice/v1/topics/{topic}/partitions/0/batches?acks=1"
    headers = {**broker.headers, "Content-Type": BINARY}

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(count // 64):
                async with session.post(url, data=body, headers=headers) as resp:
                    if resp.status != 200:
                        raise RuntimeError(f"fill failed: {resp.status} {await resp.text()}")
                    await resp.read()

    asyncio.run(run())
    return (count // 64) * 64 * len(batch)


def _fetch_all_raw(
    broker: BrokerProcess, topic: str, max_bytes: int, *, pipelined: bool = True
) -> tuple[int, float]:
    """Fetch partition 0 from offset 0 to its end; (bytes received, seconds).

    A bare keep-alive HTTP/1.1 client on a socket reading into one buffer (``recv_into``):
    the same client-side cost as the raw sendfile peer's reader, so the ratio compares what
    the broker serves rather than two clients. ``pipelined``: the next fetch is sent as soon
    as a response's head arrives, from its ``Sluice-Next-Offset`` header, so the broker
    serves it while this side reads the body (at most two fetches outstanding, as a
    consumer that knows where it goes on would); otherwise each fetch waits for the last
    one's body. Either way every body is walked to its last batch and checked against the
    header."""
    auth = broker.headers["Authorization"]
    body = memoryview(bytearray(max_bytes + (1 << 20)))
    received = 0

    def request(offset: int) -> bytes:
        return (
            f"GET /sluice/v1/topics/{topic}/partitions/0/batches?offset={offset}"
            f"&max_bytes={max_bytes} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: {auth}\r\n\r\n"
        ).encode()

    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        start = time.perf_counter()
        sock.sendall(request(0))
        carry = b""  # bytes read past the last body (the head read may overrun a short body)
        while True:
            head = carry
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("the broker closed the connection")
                head += chunk
            header_block, _, rest = head.partition(b"\r\n\r\n")
            lines = header_block.decode("latin-1").split("\r\n")
            if not lines[0].startswith("HTTP/1.1 200"):
                raise RuntimeError(f"fetch failed: {lines[0]}")
            fields = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            length = int(fields["content-length"])
            hw = int(fields["sluice-high-watermark"])
            next_offset = int(fields["sluice-next-offset"])
            more = length > 0 and next_offset < hw
            if more and pipelined:
                sock.sendall(request(next_offset))
            n = min(len(rest), length)
            body[:n] = rest[:n]
            carry = rest[n:]
            while n < length:
                got = sock.recv_into(body[n:length])
                if not got:
                    raise RuntimeError("the broker closed the connection mid-body")
                n += got
            received += length
            if length and _next_offset(body[:length]) != next_offset:
                raise RuntimeError(f"Sluice-Next-Offset {next_offset} does not follow the body")
            if not more:
                break
            if not pipelined:
                sock.sendall(request(next_offset))
        return received, time.perf_counter() - start


def _next_offset(data: bytes) -> int:
    """The offset after the last whole batch in ``data`` (walks batch lengths only)."""
    position = last = 0
    while position < len(data):
        last = position
        position += peek_batch_size(data, position)
    return read_header(data, last).next_offset


def _raw_sendfile_mb_per_s(path: str, chunk: int) -> float:
    """Send ``path`` with os.sendfile over a loopback TCP socket to a reader thread."""
    size = os.path.getsize(path)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got = [0]

    def reader() -> None:
        conn, _ = server.accept()
        with conn:
            buf = bytearray(1 << 20)
            while got[0] < size:
                n = conn.recv_into(buf)
                if not n:
                    break
                got[0] += n

    thread = threading.Thread(target=reader)
    thread.start()
    with socket.create_connection(("127.0.0.1", port)) as sock, open(path, "rb") as f:
        start = time.perf_counter()
        offset = 0
        while offset < size:
            offset += os.sendfile(sock.fileno(), f.fileno(), offset, min(chunk, size - offset))
        thread.join(timeout=60)
        elapsed = time.perf_counter() - start
    server.close()
    return got[0] / elapsed / (1024 * 1024)


FETCH_ROUNDS = 5
PREBUILT_ROUNDS = 5
PREBUILT_CONNECTIONS = 8
PREBUILT_DEPTH = 4


def _prebuilt_metric(base: Path, quick: bool) -> Metric:
    """Sluice's pre-built produce and redis-benchmark XADD in alternating short rounds
    (Redis, then Sluice, ``PREBUILT_ROUNDS`` times, each side on a machine in the same
    state), the median round of each side: one stall of this shared 2-core machine moves a
    single run by tens of percent. Both clients pipeline: redis-benchmark 64 commands per
    connection, ours ``PREBUILT_DEPTH`` requests per connection (each one batch)."""
    rounds = 3 if quick else PREBUILT_ROUNDS
    seconds = 1.0 if quick else 3.0
    redis_requests = 800_000 if quick else 2_500_000
    if smoke():
        rounds, seconds, redis_requests = 1, 0.5, 50_000
    sluice: list[float] = []
    redis_rates: list[float] = []
    client_busy: list[float] = []
    broker_us: list[float] = []  # the broker's CPU per request, per round
    broker_busy: list[float] = []  # its CPU share of the round's wall time
    broker = start_broker(base / "b-prebuilt", {"bench": (1, {})})
    try:
        with redis_peer.redis_server() as port:
            produce_prebuilt_pipelined(broker, 0.5, PREBUILT_CONNECTIONS, PREBUILT_DEPTH)  # warm
            for _ in range(rounds):
                redis_rates.append(redis_peer.benchmark_xadd(port, redis_requests))
                before = cpu_seconds(broker.pid)
                rate, result = prebuilt_run(broker, seconds, PREBUILT_CONNECTIONS, PREBUILT_DEPTH)
                used = cpu_seconds(broker.pid) - before
                sluice.append(rate)
                client_busy.append(result.client_busy)
                broker_us.append(1e6 * used / max(result.requests, 1))
                broker_busy.append(used / result.seconds)
    finally:
        broker.stop()
    each = ", ".join(
        f"{s / 1000:.0f}k vs {r / 1000:.0f}k" for s, r in zip(sluice, redis_rates, strict=True)
    )
    return Metric(
        name="produce.prebuilt.records_per_s",
        value=round(statistics.median(sluice)),
        unit="records/s",
        better="higher",
        workload=(
            f"the broker's ingest ceiling: one pre-built RecordBatch v2 body resent as it is "
            f"(no producer id, so no sequence checks; see produce.idempotent.records_per_s "
            f"for producers with ids), 16 KiB batches of 100-byte values, one batch "
            f"per request, acks=1, one broker; client: {PREBUILT_CONNECTIONS} keep-alive "
            f"HTTP/1.1 connections on raw sockets (uvloop, one process), each sending "
            f"{PREBUILT_DEPTH} requests in one write and reading their {PREBUILT_DEPTH} "
            f"answers before the next {PREBUILT_DEPTH} (pipelining, as redis-benchmark -P "
            f"does); median of {rounds} rounds of {seconds:g} s alternating with "
            f"the peer; the client's CPU "
            f"{statistics.median(client_busy):.0%} of a core, the broker's "
            f"{statistics.median(broker_busy):.0%}, broker_cpu_us_per_request "
            f"{statistics.median(broker_us):.0f} us (median rounds; user + system CPU of "
            f"the broker process over the round, 10 ms ticks)"
        ),
        peer=(
            f"redis-benchmark XADD 100-byte values -P 64 -c 50, {redis_requests:,} commands "
            f"per round, median of {rounds} rounds each just before Sluice's"
        ),
        peer_value=round(statistics.median(redis_rates)),
        target_ratio=1.0,
        rounds=f"records/s, Sluice vs Redis: {each}",
    )


JSON_ROUNDS = 3  # a quick run takes 2


def _json_metric(broker: BrokerProcess, quick: bool) -> Metric:
    """JSON produce and redis-py's pipelined XADD in alternating rounds (the peer, then
    Sluice), the median round of each side, as the other produce metrics are measured."""
    seconds, rounds, redis_records = (3.0, 2, 100_000) if quick else (5.0, JSON_ROUNDS, 300_000)
    if smoke():
        seconds, rounds, redis_records = 0.5, 1, 10_000
    connections = 8
    sluice: list[float] = []
    redis_rates: list[float] = []
    with redis_peer.redis_server() as port:
        for _ in range(rounds):
            redis_rates.append(redis_peer.redis_py_xadd(port, redis_records))
            sluice.append(asyncio.run(_produce_json(broker, seconds, connections)))
    each = ", ".join(
        f"{s / 1000:.0f}k vs {r / 1000:.0f}k" for s, r in zip(sluice, redis_rates, strict=True)
    )
    return Metric(
        name="produce.json_rest.records_per_s",
        value=round(statistics.median(sluice)),
        unit="records/s",
        better="higher",
        workload=(
            f"v3 records:batch, 100 STRING records of 100 bytes per request, "
            f"{connections} concurrent clients, acks=1; median of {rounds} rounds of "
            f"{seconds:g} s alternating with the peer"
        ),
        rounds=f"records/s, Sluice vs Redis: {each}",
        peer=(
            f"redis-py (hiredis) pipelined XADD, 1000 per round trip, {redis_records:,} "
            f"records per round, each round just before Sluice's; median of the rounds"
        ),
        peer_value=round(statistics.median(redis_rates)),
        target_ratio=0.5,
    )


def run(quick: bool = False) -> list[Metric]:
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-broker-"))
    metrics: list[Metric] = []
    try:
        metrics.append(_prebuilt_metric(base, quick))
        broker = start_broker(base / "b1", {"bench": (1, {}), "fetch": (1, {})})
        try:
            metrics.append(_json_metric(broker, quick))
            metrics.extend(_fetch_metrics(base, broker, quick))
        finally:
            broker.stop()
        metrics.extend(_sdk_and_e2e_metrics(base, quick))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return metrics


def _fetch_pass(broker: BrokerProcess, max_bytes: int) -> tuple[int, float, float]:
    """One whole read of the partition: (bytes, seconds, the broker's CPU seconds)."""
    before = cpu_seconds(broker.pid)
    got, elapsed = _fetch_all_raw(broker, "fetch", max_bytes)
    return got, elapsed, cpu_seconds(broker.pid) - before


def _fetch_metrics(base: Path, broker: BrokerProcess, quick: bool) -> list[Metric]:
    """Rounds of three passes each: the raw sendfile peer, the broker (MiB/s and CPU), and a
    second broker on a copy of the partition forced to read + copy (CPU). Alternating puts
    every side on the machine in the same state: measured one side after the other, this
    shared machine's drift moved the CPU ratio by tens of percent between runs. CPU time
    comes in 10 ms clock ticks (a quick pass is about 70 ms of CPU), so each side's CPU is
    summed over all its passes."""
    total = (256 if quick else 1024) * 1024 * 1024
    rounds = 8 if quick else FETCH_ROUNDS
    if smoke():
        total, rounds = 16 * 1024 * 1024, 1
    written = _fill(broker, "fetch", total)
    segment = sorted((broker.data_dir / "fetch-0").glob("*.log"))[0]
    max_bytes = 1024 * 1024
    copy_broker = start_broker(
        base / "b-copy", {"fetch": (1, {})}, extra_args=["--fetch-path", "copy"]
    )
    rates: list[float] = []
    raws: list[float] = []
    serial: list[float] = []  # one fetch outstanding at a time, for comparison
    send_cpu = copy_cpu = 0.0
    send_bytes = copy_bytes = 0
    try:
        copy_broker.stop()
        shutil.rmtree(copy_broker.data_dir / "fetch-0", ignore_errors=True)
        shutil.copytree(broker.data_dir / "fetch-0", copy_broker.data_dir / "fetch-0")
        copy_broker.start()
        _fetch_all_raw(broker, "fetch", max_bytes)  # warm the page cache and both brokers
        _fetch_all_raw(copy_broker, "fetch", max_bytes)
        for _ in range(rounds):
            raws.append(_raw_sendfile_mb_per_s(str(segment), max_bytes))
            got, elapsed, cpu = _fetch_pass(broker, max_bytes)
            assert got == written, f"fetched {got} bytes of {written}"
            rates.append(got / (1024 * 1024) / elapsed)
            send_cpu += cpu
            send_bytes += got
            got, _, cpu = _fetch_pass(copy_broker, max_bytes)
            assert got == written, f"the copying broker fetched {got} bytes of {written}"
            copy_cpu += cpu
            copy_bytes += got
            got, elapsed = _fetch_all_raw(broker, "fetch", max_bytes, pipelined=False)
            serial.append(got / (1024 * 1024) / elapsed)
    finally:
        copy_broker.stop()
    send_cpu_per_gib = send_cpu / (send_bytes / 1024**3)
    copy_cpu_per_gib = copy_cpu / (copy_bytes / 1024**3)
    mib = written / (1024 * 1024)
    return [
        Metric(
            name="fetch.zero_copy.mb_per_s",
            value=round(statistics.median(rates), 1),
            unit="MiB/s",
            better="higher",
            workload=(
                f"binary fetch of a page-cached {mib:.0f} MiB partition by one "
                f"consumer (a bare keep-alive HTTP/1.1 client reading with recv_into, "
                f"as the peer's reader does), max_bytes 1 MiB per fetch, the next fetch "
                f"sent when a response's head arrives (its Sluice-Next-Offset); median of "
                f"{rounds} passes alternating with the peer's; with one fetch outstanding "
                f"at a time (each waiting for the last body) "
                f"{statistics.median(serial):.0f} MiB/s, median of as many passes"
            ),
            peer=(
                "raw os.sendfile of the segment file to a loopback socket, 1 MiB calls; median pass"
            ),
            peer_value=round(statistics.median(raws), 1),
            target_ratio=0.7,
            rounds="MiB/s: "
            + ", ".join(f"{a:.0f} vs {b:.0f}" for a, b in zip(rates, raws, strict=True)),
        ),
        Metric(
            name="fetch.zero_copy.broker_cpu_s_per_gib",
            value=round(send_cpu_per_gib, 3),
            unit="CPU s/GiB",
            better="lower",
            workload=(
                f"broker process CPU (utime+stime) while serving the {mib:.0f} MiB partition "
                f"{rounds} times over (the fetch client above), summed over its passes"
            ),
            peer=(
                "the same endpoint on a broker started with --fetch-path copy, as many "
                "passes, each right after the zero-copy broker's"
            ),
            peer_value=round(copy_cpu_per_gib, 3),
            target_ratio=0.7,
        ),
    ]


def _sluice_bench(broker: BrokerProcess, *args: str) -> dict:
    """Run ``sluice bench ...`` (the SDK) as its own process; its JSON summary."""
    cmd = [
        sys.executable,
        "-m",
        "brokernodes.cli",
        "--url",
        broker.url,
        "bench",
        *args,
        "--format",
        "json",
    ]
    env = {**os.environ, "SLUICE_API_KEY": broker.api_key}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"sluice bench {args} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _sluice_e2e(broker: BrokerProcess, seconds: str) -> dict:
    """One ``sluice bench e2e`` run with the SDK's low-latency recipe (docs/sdk.md): send at
    once over the binary WebSocket produce stream, records pushed to the consumer, the SDK on
    uvloop (as the broker is)."""
    return _sluice_bench(
        broker,
        "e2e",
        "e2e",
        "--rate",
        "10000",
        "--duration",
        seconds,
        "--record-size",
        "100",
        "--keys",
        "100",
        "--acks",
        "1",
        "--linger-ms",
        "0",
        "--produce-mode",
        "websocket",
        "--fetch-mode",
        "websocket",
        "--loop",
        "uvloop",
    )


# The SDK configured for throughput (docs/sdk.md): binary produce frames on one WebSocket
# stream per broker instead of an HTTP POST per request, and the uvloop event loop.
SDK_THROUGHPUT_RECIPE = ("--produce-mode", "websocket", "--loop", "uvloop")


def _sdk_and_e2e_metrics(base: Path, quick: bool):
    """SDK producer throughput and end-to-end latency, each against its Redis peer, in
    rounds (the peer, then Sluice) so both see the same machine; each side's figure is the
    median of its rounds (one stall of the shared machine moves a single run a lot: a 3 s
    run's p99 by milliseconds)."""
    count = 300_000 if quick else 2_000_000
    keys = 10_000
    seconds = "3" if quick else "10"
    e2e_rounds = 3 if quick else E2E_ROUNDS
    redis_records = 100_000 if quick else 500_000
    if smoke():
        count, seconds, e2e_rounds, redis_records = 20_000, "1", 1, 10_000
    broker = start_broker(base / "b-sdk", {"sdk": (6, {}), "e2e": (1, {})})
    try:
        redis_rates, sdk_runs = [], []
        runs: list[tuple[float, dict]] = []  # (Redis p99, Sluice's summary) per round
        with redis_peer.redis_server() as port:
            produce_args = (
                "produce",
                "sdk",
                "--count",
                str(count),
                "--record-size",
                "100",
                "--keys",
                str(keys),
                "--acks",
                "1",
            )
            for _ in range(1 if quick or smoke() else SDK_ROUNDS):
                redis_rates.append(redis_peer.redis_py_xadd(port, redis_records))
                sdk_runs.append(_sluice_bench(broker, *produce_args, *SDK_THROUGHPUT_RECIPE))
            # the SDK's defaults (HTTP produce, asyncio), reported beside the recipe
            sdk_default = _sluice_bench(broker, *produce_args)
            for i in range(e2e_rounds):
                redis_run = redis_e2e.round_latencies(port, f"e2e-{i}", 10_000, float(seconds))
                runs.append((redis_run["p99_ms"], _sluice_e2e(broker, seconds)))
    finally:
        broker.stop()
    failed = sum(e2e["failed"] for _, e2e in runs)
    produce_failed = sum(r["failed"] for r in [*sdk_runs, sdk_default])
    if produce_failed or failed:
        raise RuntimeError(f"records failed: produce {produce_failed}, e2e {failed}")
    sdk_rate = statistics.median(r["records_per_s"] for r in sdk_runs)
    sdk_rounds = "; ".join(
        f"{r['records_per_s'] / 1000:.0f}k vs {p / 1000:.0f}k"
        for r, p in zip(sdk_runs, redis_rates, strict=True)
    )
    redis_p99 = statistics.median(r for r, _ in runs)
    sluice_p99 = statistics.median(e2e["latency_p99_ms"] for _, e2e in runs)
    e2e_each = "; ".join(
        f"Sluice {e2e['latency_p99_ms']:.2f} (p50 {e2e['latency_p50_ms']:.2f}) vs Redis {r:.2f}"
        for r, e2e in runs
    )
    return [
        Metric(
            name="produce.sdk.records_per_s",
            value=round(sdk_rate),
            unit="records/s",
            better="higher",
            workload=(
                f"Python SDK AsyncProducer (sluice bench produce, its own process), "
                f"{count:,} records of 100 bytes keyed over {keys:,} keys, 6 "
                f"partitions, acks=1, idempotent, batch.size 16384, linger.ms 5, with the "
                f"SDK's throughput recipe (produce_mode websocket: binary produce frames on "
                f"one stream per broker; the SDK on uvloop; docs/sdk.md); the median "
                f"of {len(sdk_runs)} round(s) alternating with the peer; with the SDK's "
                f"defaults (HTTP produce, asyncio) "
                f"{sdk_default['records_per_s'] / 1000:.0f}k in one run after them"
            ),
            peer="redis-py (hiredis) pipelined XADD, 1000 per round trip, each round just "
            "before Sluice's; median of the rounds",
            peer_value=round(statistics.median(redis_rates)),
            target_ratio=2.0,
            rounds=f"records/s, Sluice vs Redis: {sdk_rounds}",
        ),
        Metric(
            name="e2e.p99_ms",
            value=round(sluice_p99, 3),
            unit="ms",
            better="lower",
            workload=(
                f"SDK producer (linger.ms 0, acks=1, produce_mode websocket: binary "
                f"produce frames) to SDK consumer (fetch_mode websocket: binary WebSocket "
                f"consume stream), one process on uvloop, at a steady 10,000 records/s for "
                f"{seconds} s after a warm-up (a record per key sent, acknowledged and "
                f"received before the clock starts: streams open, as the peer's connections "
                f"are); median p99 of {e2e_rounds} rounds alternating with the peer"
            ),
            rounds=f"ms: {e2e_each}",
            peer=(
                "Redis XADD to XREAD BLOCK (COUNT 1000, BLOCK 200) at the same rate and as "
                "long, treated as Sluice's client is (bench/redis_e2e.py): redis-py with "
                "hiredis, producer and consumer in processes of their own, 1,000 records "
                "sent and received before the clock, then gc.collect() and gc.freeze() in "
                "both, the records due sent every 1 ms turn (one pipeline), as the SDK's "
                "loop sends them; each round just before Sluice's; median p99 of the rounds"
            ),
            peer_value=round(redis_p99, 3),
            target_ratio=2.0,
            target_value=10.0,
        ),
    ]
