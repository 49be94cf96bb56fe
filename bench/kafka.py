"""Kafka-protocol benchmarks: librdkafka (confluent-kafka) against a broker's Kafka listener,
beside the peers of bench/broker.py, measured in the same run (../shared/BENCH.md).

- ``kafka.produce.records_per_s``: confluent-kafka Producers, 100-byte values, acks=1, with
  librdkafka's throughput recipe (``PRODUCE_RECIPE``: linger and batches larger than the
  defaults, no compression) into one partition for a fixed time, every record acknowledged
  (``flush``) inside the clock. Peer: ``redis-benchmark`` XADD of 100-byte values ``-P 64``,
  as ``produce.prebuilt`` drives it; alternating rounds, the median round of each side.
- ``kafka.fetch.mb_per_s``: a confluent-kafka Consumer assigned a pre-filled, page-cached
  partition from offset 0 (large fetch sizes, ``FETCH_RECIPE``) until it has received its
  last record. Peer: raw ``os.sendfile`` of the partition's segment file to a loopback
  socket (bench/broker.py's); alternating passes, the median pass of each side.
- ``kafka.e2e.p99_ms``: a librdkafka producer (linger.ms 0) sends at a steady 10k records/s
  to a librdkafka consumer in another process (fetch.wait.max.ms small); send to receipt,
  after a warm-up. Peer: Redis XADD to XREAD BLOCK, producer and consumer in their own
  processes too; alternating rounds, the median round's p99 on each side.
- ``kafka.produce.broker_cpu_us_per_request`` and ``kafka.fetch.broker_cpu_us_per_request``:
  the broker's CPU per small request on the Kafka listener (one-record Produce, acks=1; a
  long-poll Fetch woken by a produce), from bench/request_cost.py on the same broker.

Every client runs in its own process (``python -m bench.kafka <role> ...``, one JSON line on
stdout), so the harness is never the bottleneck and each side's client CPU is reported. The
broker is a real process started as bench/broker.py starts its brokers (its default flags:
uvloop, fsync by policy). ``SLUICE_BENCH_SMOKE=1`` shrinks every part to a few seconds, to
check that the section works (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.broker import KEY_ID, SECRET

REPO = Path(__file__).resolve().parents[1]
VALUE_BYTES = 100

# librdkafka's throughput recipe (its INTRODUCTION.md, "High throughput"): let batches fill
# (linger 10 ms, up to 100k records or 1 MB a batch) rather than the defaults (5 ms, 10k),
# room for a million queued records so produce() rarely meets a full queue, acks=1, no
# compression (the peer compresses nothing either), no idempotence (librdkafka's default).
PRODUCE_RECIPE = {
    "linger.ms": 10,
    "batch.num.messages": 100_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "compression.type": "none",
    "acks": 1,
    "enable.idempotence": False,
}
PRODUCERS = 1  # producer processes (each one Producer, one connection)

# Large fetches: up to 16 MiB per partition per fetch, a prefetch queue of 256 MiB, and a
# 1 ms backoff (instead of 1 s) when that queue is full, so the consumer's own thread keeps
# fetching while the application drains the queue.
FETCH_RECIPE = {
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "receive.message.max.bytes": 65 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 1,
    "enable.auto.commit": False,
}
FETCH_VALUE_BYTES = 16 * 1024  # records of the main fetch figure
FETCH_BATCH_RECORDS = 16  # 256 KiB batches

# librdkafka's low-latency settings (its wiki, "How to decrease message latency"): send at
# once, Nagle off on both ends, the broker may hold a fetch at most 5 ms, a short backoff.
E2E_PRODUCER = {"linger.ms": 0, "acks": 1, "socket.nagle.disable": True}
E2E_CONSUMER = {
    "fetch.wait.max.ms": 5,
    "fetch.min.bytes": 1,
    "fetch.error.backoff.ms": 1,
    "socket.nagle.disable": True,
    "enable.auto.commit": False,
}
E2E_RATE = 10_000  # records/s
E2E_LOW_RATE = 1_000  # one more Kafka round at this rate, reported in the workload text
E2E_WARMUP_S = 1.0


@dataclass(frozen=True)
class Plan:
    """How long and how large each part runs."""

    produce_rounds: int
    produce_seconds: float
    redis_requests: int  # redis-benchmark commands per peer round
    fetch_bytes: int  # the main fetch partition
    fetch_rounds: int
    small_fetch_bytes: int  # the 100-byte-record partition read once (0: skipped)
    e2e_rounds: int
    e2e_seconds: float
    cost_requests: int = 10_000  # requests per phase of bench/request_cost.py


FULL = Plan(5, 3.0, 2_500_000, 1024 << 20, 5, 128 << 20, 5, 10.0)
QUICK = Plan(3, 1.0, 800_000, 256 << 20, 3, 0, 3, 3.0, cost_requests=5_000)
SMOKE = Plan(1, 0.5, 100_000, 16 << 20, 1, 4 << 20, 1, 0.5, cost_requests=500)


def _plan(quick: bool) -> Plan:
    if os.environ.get("SLUICE_BENCH_SMOKE") == "1":
        return SMOKE
    return QUICK if quick else FULL


def client_config(bootstrap: str, **extra) -> dict:
    """librdkafka settings for a Sluice Kafka listener (SASL/PLAIN: key id and secret);
    ``SLUICE_BENCH_KAFKA_DEBUG`` (e.g. ``protocol,fetch``) turns librdkafka's debug log on,
    onto the client processes' stderr."""
    debug = os.environ.get("SLUICE_BENCH_KAFKA_DEBUG")
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": KEY_ID,
        "sasl.password": SECRET,
        **({"debug": debug} if debug else {}),
        **extra,
    }


def _cpu() -> float:
    """This process's user + system CPU seconds so far (every thread: librdkafka's too)."""
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------------------------------
# Client processes (``python -m bench.kafka <role>``); each prints one JSON line.


def produce_worker(bootstrap: str, topic: str, start_at: float, seconds: float) -> dict:
    """Produce 100-byte values to partition 0 from ``start_at`` (time.monotonic) for
    ``seconds``, then flush: every record acknowledged or failed before the clock stops."""
    from confluent_kafka import Producer

    failed = [0]

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed[0] += 1

    producer = Producer(
        client_config(
            bootstrap,
            **PRODUCE_RECIPE,
            on_delivery=on_delivery,
            **{"delivery.report.only.error": True},
        )
    )
    producer.produce(topic, b"warm", partition=0)  # connect, authenticate, learn the leader
    if producer.flush(30) or failed[0]:
        raise RuntimeError("the warm-up record was not acknowledged")
    # the client's bulk call (one C call per 1,000 records): a produce() per record in
    # Python costs the client more CPU than the broker spends on the record, and the two
    # share this machine's two cores
    value = b"v" * VALUE_BYTES
    messages = [{"value": value} for _ in range(1000)]
    produce_batch, poll = producer.produce_batch, producer.poll
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    cpu0 = _cpu()
    start = time.monotonic()
    deadline = start + seconds
    sent = 0
    while time.monotonic() < deadline:
        try:
            queued = produce_batch(topic, messages, partition=0)
        except BufferError:
            queued = 0
        sent += queued
        poll(0.001 if queued < len(messages) else 0)  # the queue was full: let it drain
    left = producer.flush(60)
    end = time.monotonic()
    return {
        "records": sent,
        "failed": failed[0] + left,
        "start": start,
        "end": end,
        "cpu_s": _cpu() - cpu0,
    }


def fetch_worker(bootstrap: str, topic: str, records: int, timeout: float) -> dict:
    """Read partition 0 from offset 0 until its ``records`` records have arrived."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        client_config(bootstrap, **FETCH_RECIPE, **{"group.id": f"bench-fetch-{os.getpid()}"})
    )
    try:
        # connect, authenticate and reach the leader (ListOffsets) before the clock
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high != records:
            raise RuntimeError(f"the partition holds {high} records, not {records}")
        cpu0 = _cpu()
        start = time.monotonic()
        deadline = start + timeout
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        last = -1
        while last < records - 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetched {got} of {records} records in {timeout:.0f} s")
            # ask for exactly what is left: consume() returns early only with a full batch
            batch = consumer.consume(min(10_000, records - got), 1.0)
            for message in batch:
                error = message.error()
                if error is None:
                    got += 1
                    last = message.offset()
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"fetch failed: {error}")
        elapsed = time.monotonic() - start
        return {"records": got, "seconds": elapsed, "cpu_s": _cpu() - cpu0}
    finally:
        consumer.close()


def _stamp(kind: bytes) -> bytes:
    """A value carrying its send time: ``kind`` (w: warm-up, m: measured) and
    time.monotonic_ns (CLOCK_MONOTONIC: one clock for every process), padded to 100 bytes."""
    head = b"%s%d " % (kind, time.monotonic_ns())
    return head + b"v" * (VALUE_BYTES - len(head))


def e2e_produce_worker(backend: str, target: str, key: str, rate: int, seconds: float) -> dict:
    """Send ``E2E_WARMUP_S`` of warm-up records, then ``rate * seconds`` measured ones, at a
    steady ``rate``; ``target`` is the bootstrap (kafka) or the Redis port (redis)."""
    failed = [0]
    if backend == "kafka":
        from confluent_kafka import Producer

        def on_delivery(err, _msg) -> None:
            if err is not None:
                failed[0] += 1

        producer = Producer(client_config(target, **E2E_PRODUCER, on_delivery=on_delivery))

        def send(value: bytes) -> None:
            producer.produce(key, value, partition=0)
            producer.poll(0)

        def finish() -> int:
            return producer.flush(30)
    else:
        import redis

        client = redis.Redis(port=int(target))

        def send(value: bytes) -> None:
            client.xadd(key, {"v": value})

        def finish() -> int:
            return 0

    cpu0 = _cpu()
    interval = 1.0 / rate
    warm = int(rate * E2E_WARMUP_S)
    total = warm + int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(_stamp(b"w" if i < warm else b"m"))
    failed[0] += finish()
    return {"sent": total - warm, "failed": failed[0], "cpu_s": _cpu() - cpu0}


def e2e_consume_worker(backend: str, target: str, key: str, count: int, timeout: float) -> dict:
    """Print ``ready`` once subscribed, then receive until ``count`` measured records have
    arrived (or ``timeout`` seconds pass); send-to-receipt latencies in milliseconds."""
    latencies: list[float] = []

    def take(value: bytes, now: int) -> None:
        if value[:1] == b"m":
            latencies.append((now - int(value[1 : value.index(b" ")])) / 1e6)

    cpu0 = _cpu()
    if backend == "kafka":
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            client_config(target, **E2E_CONSUMER, **{"group.id": f"bench-e2e-{os.getpid()}"})
        )
        consumer.get_watermark_offsets(TopicPartition(key, 0), timeout=10)  # reach the leader
        consumer.assign([TopicPartition(key, 0, 0)])
        print("ready", flush=True)
        deadline = time.monotonic() + timeout
        try:
            while len(latencies) < count and time.monotonic() < deadline:
                message = consumer.poll(0.1)
                now = time.monotonic_ns()
                if message is None:
                    continue
                error = message.error()
                if error is None:
                    take(message.value(), now)
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"consume failed: {error}")
        finally:
            consumer.close()
    else:
        import redis

        client = redis.Redis(port=int(target))
        client.ping()
        print("ready", flush=True)
        last_id = "0-0"
        deadline = time.monotonic() + timeout
        while len(latencies) < count and time.monotonic() < deadline:
            reply = client.xread({key: last_id}, count=1000, block=200)
            now = time.monotonic_ns()
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    last_id = entry_id
                    take(fields[b"v"], now)
    cpu = _cpu() - cpu0
    if not latencies:
        return {"received": 0, "cpu_s": cpu}
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 100 else None
    return {
        "received": len(latencies),
        "p50_ms": statistics.median(latencies),
        "p99_ms": cuts[98] if cuts else max(latencies),
        "max_ms": max(latencies),
        "cpu_s": cpu,
    }


def _worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka")
    roles = parser.add_subparsers(dest="role", required=True)
    p = roles.add_parser("produce")
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("start_at", type=float)
    p.add_argument("seconds", type=float)
    f = roles.add_parser("fetch")
    f.add_argument("bootstrap")
    f.add_argument("topic")
    f.add_argument("records", type=int)
    f.add_argument("timeout", type=float)
    for name in ("e2e-produce", "e2e-consume"):
        e = roles.add_parser(name)
        e.add_argument("backend", choices=("kafka", "redis"))
        e.add_argument("target")
        e.add_argument("key")
        e.add_argument("number", type=float)  # rate (produce) or count (consume)
        e.add_argument("seconds", type=float)  # duration (produce) or timeout (consume)
    a = parser.parse_args(argv)
    if a.role == "produce":
        out = produce_worker(a.bootstrap, a.topic, a.start_at, a.seconds)
    elif a.role == "fetch":
        out = fetch_worker(a.bootstrap, a.topic, a.records, a.timeout)
    elif a.role == "e2e-produce":
        out = e2e_produce_worker(a.backend, a.target, a.key, int(a.number), a.seconds)
    else:
        out = e2e_consume_worker(a.backend, a.target, a.key, int(a.number), a.seconds)
    print(json.dumps(out), flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# The harness side: start the broker and the peers, run rounds, build the metrics.


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.kafka", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _last_json(out: str, what: str) -> dict:
    lines = [line for line in out.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{what} printed no result: {out[-2000:]!r}")
    return json.loads(lines[-1])


def _run_worker(*args: str, timeout: float) -> dict:
    out = subprocess.run(
        _command(*args), capture_output=True, text=True, timeout=timeout, cwd=REPO, env=_env()
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.kafka {args[0]} failed: {out.stderr[-3000:]}")
    return _last_json(out.stdout, f"bench.kafka {args[0]}")


def _kafka_produce_round(bootstrap: str, topic: str, seconds: float) -> tuple[float, float]:
    """``PRODUCERS`` producer processes from one common start; (records/s, their CPU s)."""
    start_at = time.monotonic() + 1.5  # to import, connect, warm up (or start late)
    procs = [
        subprocess.Popen(
            _command("produce", bootstrap, topic, repr(start_at), repr(seconds)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=_env(),
        )
        for _ in range(PRODUCERS)
    ]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"bench.kafka produce failed: {err[-3000:]}")
        results.append(_last_json(out, "bench.kafka produce"))
    failed = sum(r["failed"] for r in results)
    if failed:
        raise RuntimeError(f"{failed} produced records were not acknowledged")
    records = sum(r["records"] for r in results)
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    return records / elapsed, sum(r["cpu_s"] for r in results)


def _redis_benchmark_round(port: int, requests: int) -> tuple[float, float]:
    """redis-benchmark's XADD rate and the CPU seconds its process used."""
    from bench import redis_peer

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = redis_peer.benchmark_xadd(port, requests)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rate, cpu


def _produce_metric(broker, plan: Plan):
    from bench import redis_peer
    from bench.broker import cpu_seconds
    from bench.report import Metric

    sluice: list[float] = []
    redis_rates: list[float] = []
    client_cpu: list[float] = []
    redis_cpu: list[float] = []
    broker_cpu: list[float] = []
    with redis_peer.redis_server() as port:
        _kafka_produce_round(broker.bootstrap, "kprod", min(plan.produce_seconds, 0.5))  # warm
        for _ in range(plan.produce_rounds):
            rate, cpu = _redis_benchmark_round(port, plan.redis_requests)
            redis_rates.append(rate)
            redis_cpu.append(cpu)
            before = cpu_seconds(broker.pid)
            rate, cpu = _kafka_produce_round(broker.bootstrap, "kprod", plan.produce_seconds)
            broker_cpu.append(cpu_seconds(broker.pid) - before)
            sluice.append(rate)
            client_cpu.append(cpu)
    each = ", ".join(
        f"{s / 1000:.0f}k vs {r / 1000:.0f}k" for s, r in zip(sluice, redis_rates, strict=True)
    )
    recipe = ", ".join(f"{k} {v}" for k, v in PRODUCE_RECIPE.items())
    return Metric(
        name="kafka.produce.records_per_s",
        value=round(statistics.median(sluice)),
        unit="records/s",
        better="higher",
        workload=(
            f"confluent-kafka {_versions()} Producer in {PRODUCERS} process(es) of its own, "
            f"100-byte values without keys into one partition over the Kafka listener "
            f"(SASL/PLAIN), librdkafka's throughput recipe ({recipe}), produce_batch() of "
            f"1,000 records in a tight loop for {plan.produce_seconds:g} s then flush() "
            f"inside the clock, every record acknowledged; one broker; median of "
            f"{plan.produce_rounds} rounds "
            f"alternating with the peer; client CPU "
            f"{statistics.median(client_cpu):.2f} s, broker CPU "
            f"{statistics.median(broker_cpu):.2f} s per round (median)"
        ),
        peer=(
            f"redis-benchmark XADD 100-byte values -P 64 -c 50, {plan.redis_requests:,} "
            f"commands per round, median of {plan.produce_rounds} rounds each just before "
            f"Sluice's; its CPU {statistics.median(redis_cpu):.2f} s per round (median)"
        ),
        peer_value=round(statistics.median(redis_rates)),
        target_ratio=1.5,
        rounds=f"records/s, Sluice vs Redis: {each}",
    )


def _big_batch() -> tuple[bytes, int]:
    """One RecordBatch v2 of ``FETCH_BATCH_RECORDS`` records of ``FETCH_VALUE_BYTES``."""
    from brokernodes.records.batch import Record, encode_batch

    now = int(time.time() * 1000)
    records = [
        Record(now, None, os.urandom(FETCH_VALUE_BYTES // 2).hex().encode())
        for _ in range(FETCH_BATCH_RECORDS)
    ]
    return encode_batch(records), FETCH_BATCH_RECORDS


def _fill(broker, topic: str, batch: bytes, total_bytes: int) -> int:
    """POST copies of ``batch`` to partition 0 (binary produce, acks=1, 8 MiB requests) until
    about ``total_bytes`` are stored; returns how many batches were written."""
    import aiohttp

    per_request = max(1, (8 << 20) // len(batch))
    requests = max(1, total_bytes // (len(batch) * per_request))
    body = batch * per_request
    url = f"{broker.url}/sluice/v1/topics/{topic}/partitions/0/batches?acks=1"
    headers = {**broker.headers, "Content-Type": "application/vnd.kafka.recordbatch.v2"}

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(requests):
                async with session.post(url, data=body, headers=headers) as resp:
                    if resp.status != 200:
                        raise RuntimeError(f"fill failed: {resp.status} {await resp.text()}")
                    await resp.read()

    asyncio.run(run())
    return requests * per_request


def _fetch_pass(broker, topic: str, records: int) -> dict:
    return _run_worker("fetch", broker.bootstrap, topic, str(records), "300", timeout=400)


def _fetch_metric(broker, plan: Plan):
    from bench.broker import _raw_sendfile_mb_per_s
    from bench.report import Metric
    from bench.storage import make_batch

    mib = 1024 * 1024
    batch, per_batch = _big_batch()
    batches = _fill(broker, "kfetch", batch, plan.fetch_bytes)
    batch_kib = len(batch) // 1024
    written = batches * len(batch)
    records = batches * per_batch
    segment = sorted((broker.data_dir / "kfetch-0").glob("*.log"))[0]
    _fetch_pass(broker, "kfetch", records)  # warm the page cache and the broker
    rates: list[float] = []
    raws: list[float] = []
    client_cpu: list[float] = []
    for _ in range(plan.fetch_rounds):
        raws.append(_raw_sendfile_mb_per_s(str(segment), mib))
        result = _fetch_pass(broker, "kfetch", records)
        rates.append(written / mib / result["seconds"])
        client_cpu.append(result["cpu_s"] / (written / 1024**3))
    small = ""
    if plan.small_fetch_bytes:
        batch, per_batch = make_batch()
        batches = _fill(broker, "kfetch-small", batch, plan.small_fetch_bytes)
        small_records = batches * per_batch
        _fetch_pass(broker, "kfetch-small", small_records)  # warm
        result = _fetch_pass(broker, "kfetch-small", small_records)
        small = (
            f"; the same consumer over {batches * len(batch) / mib:.0f} MiB of 100-byte "
            f"records in 16 KiB batches (fetch.zero_copy's data), one pass after them: "
            f"{batches * len(batch) / mib / result['seconds']:.0f} MiB/s, "
            f"{small_records / result['seconds'] / 1e6:.2f}M records/s (the client's "
            f"per-record work bounds it)"
        )
    recipe = ", ".join(f"{k} {v}" for k, v in FETCH_RECIPE.items())
    return Metric(
        name="kafka.fetch.mb_per_s",
        value=round(statistics.median(rates), 1),
        unit="MiB/s",
        better="higher",
        workload=(
            f"confluent-kafka {_versions()} Consumer in a process of its own, assigned "
            f"partition 0 of a page-cached {written / mib:.0f} MiB topic from offset 0 "
            f"({records:,} records of {FETCH_VALUE_BYTES // 1024} KiB in "
            f"{batch_kib} KiB batches) until its last record is in the application's "
            f"hands ({recipe}); "
            f"median of {plan.fetch_rounds} passes alternating with the peer's; "
            f"client CPU {statistics.median(client_cpu):.2f} s/GiB (median)" + small
        ),
        peer="raw os.sendfile of the segment file to a loopback socket, 1 MiB calls; median pass",
        peer_value=round(statistics.median(raws), 1),
        target_ratio=0.7,
        rounds="MiB/s: "
        + ", ".join(f"{a:.0f} vs {b:.0f}" for a, b in zip(rates, raws, strict=True)),
    )


def _e2e_round(
    backend: str,
    target: str,
    key: str,
    seconds: float,
    rate: int = E2E_RATE,
    broker_pid: int | None = None,
) -> dict:
    """One round: the consumer process first (until it says ready), then the producer;
    with ``broker_pid``, also the broker's CPU share while the producer process ran."""
    from bench.broker import cpu_seconds

    count = int(rate * seconds)
    # room for a broker that falls behind the rate: a late record is slow, not lost
    timeout = 4 * (seconds + E2E_WARMUP_S) + 30
    consumer = subprocess.Popen(
        _command("e2e-consume", backend, target, key, str(count), repr(timeout)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=_env(),
    )
    try:
        ready, _, _ = select.select([consumer.stdout], [], [], 30)
        line = consumer.stdout.readline() if ready else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the {backend} e2e consumer did not start: {line!r}")
        before, wall = (cpu_seconds(broker_pid), time.monotonic()) if broker_pid else (0, 0)
        produced = _run_worker(
            "e2e-produce", backend, target, key, str(rate), repr(seconds), timeout=timeout + 30
        )
        if broker_pid:
            busy = (cpu_seconds(broker_pid) - before) / (time.monotonic() - wall)
        out, err = consumer.communicate(timeout=timeout + 30)
        if consumer.returncode != 0:
            raise RuntimeError(f"the {backend} e2e consumer failed: {err[-3000:]}")
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
    received = _last_json(out, f"the {backend} e2e consumer")
    if produced["failed"] or received["received"] != count:
        raise RuntimeError(
            f"{backend} e2e: {produced['failed']} sends failed, "
            f"{received['received']} of {count} received"
        )
    return {
        **received,
        "producer_cpu_s": produced["cpu_s"],
        **({"broker_busy": busy} if broker_pid else {}),
    }


def _e2e_metric(broker, plan: Plan):
    from bench import redis_peer
    from bench.report import Metric

    runs: list[tuple[dict, dict]] = []  # (Redis, Sluice) per round
    with redis_peer.redis_server() as port:
        for i in range(plan.e2e_rounds):
            redis_run = _e2e_round("redis", str(port), f"e2e-{i}", plan.e2e_seconds)
            kafka_run = _e2e_round(
                "kafka", broker.bootstrap, f"ke2e-{i}", plan.e2e_seconds, broker_pid=broker.pid
            )
            runs.append((redis_run, kafka_run))
    low = _e2e_round("kafka", broker.bootstrap, "ke2e-low", plan.e2e_seconds, E2E_LOW_RATE)
    sluice_p99 = statistics.median(k["p99_ms"] for _, k in runs)
    redis_p99 = statistics.median(r["p99_ms"] for r, _ in runs)
    each = "; ".join(
        f"Sluice {k['p99_ms']:.2f} (p50 {k['p50_ms']:.2f}) vs Redis {r['p99_ms']:.2f} "
        f"(p50 {r['p50_ms']:.2f})"
        for r, k in runs
    )
    producer = ", ".join(f"{k} {v}" for k, v in E2E_PRODUCER.items())
    consumer = ", ".join(f"{k} {v}" for k, v in E2E_CONSUMER.items())
    per_s = plan.e2e_seconds + E2E_WARMUP_S  # the clients' CPU covers the warm-up too

    def cpu(side: int, key: str) -> float:
        return statistics.median(run[side][key] for run in runs) / per_s

    return Metric(
        name="kafka.e2e.p99_ms",
        value=round(sluice_p99, 3),
        unit="ms",
        better="lower",
        workload=(
            f"confluent-kafka {_versions()} producer ({producer}) in one process sending "
            f"100-byte records to partition 0 at a steady {E2E_RATE:,} records/s for "
            f"{plan.e2e_seconds:g} s after {E2E_WARMUP_S:g} s of warm-up, a confluent-kafka "
            f"consumer ({consumer}; poll() per record) in another, assigned from offset 0; "
            f"send (produce() call) to receipt (poll() return), one monotonic clock; "
            f"median p50 {statistics.median(k['p50_ms'] for _, k in runs):.2f} ms; median "
            f"p99 of {plan.e2e_rounds} rounds alternating with the peer; "
            f"client CPU per second: producer {cpu(1, 'producer_cpu_s'):.2f} s, consumer "
            f"{cpu(1, 'cpu_s'):.2f} s (Redis's: {cpu(0, 'producer_cpu_s'):.2f} s, "
            f"{cpu(0, 'cpu_s'):.2f} s), the broker's CPU share while the producer process "
            f"ran {statistics.median(k['broker_busy'] for _, k in runs):.0%} (median); the "
            f"same clients at {E2E_LOW_RATE:,} records/s, one round after them: p50 "
            f"{low['p50_ms']:.2f} ms, p99 {low['p99_ms']:.2f} ms"
        ),
        peer=(
            "Redis XADD to XREAD BLOCK (redis-py; producer and consumer in processes of "
            "their own, COUNT 1000, BLOCK 200) at the same rate, warm-up and length, each "
            "round just before Sluice's; median p99 of the rounds"
        ),
        peer_value=round(redis_p99, 3),
        target_value=2.0,
        rounds=f"ms: {each}",
    )


def _cost_metrics(broker, plan: Plan) -> list:
    """The broker's CPU per small Produce and long-poll Fetch (bench/request_cost.py)."""
    from bench import request_cost
    from bench.report import Metric

    cost = request_cost.measure(broker, plan.cost_requests)
    n = f"{plan.cost_requests:,}"
    common = (
        "a raw-protocol client in a process of its own, one request in flight, one broker; "
        "the broker's user + system CPU (/proc) over the phase, less its idle rate "
        f"({cost['broker_idle_cpu_share']:.1%} of a core) times the phase's wall time"
    )
    return [
        Metric(
            name="kafka.produce.broker_cpu_us_per_request",
            value=cost["produce"]["broker_cpu_us_per_request"],
            unit="us",
            better="lower",
            workload=(
                f"{n} Produce requests (v{request_cost.produce_version()}, acks=1), each one "
                f"RecordBatch of one 100-byte record, as librdkafka sends with linger.ms 0; "
                f"{common}; {cost['produce']['requests_per_s']:,} requests/s (wall clock)"
            ),
            target_value=50.0,
        ),
        Metric(
            name="kafka.fetch.broker_cpu_us_per_request",
            value=cost["fetch"]["broker_cpu_us_per_request"],
            unit="us",
            better="lower",
            workload=(
                f"{n} Fetch requests (v{request_cost.fetch_version()}, topic ids, max wait "
                f"1 s, min bytes 1), each parked in the long poll and woken by a one-record "
                f"produce on a second connection; the phase's CPU less {n} times the "
                f"produce figure; {common}; wake latency from the produce's send to the "
                f"fetch's answer p50 {cost['fetch']['wake_p50_ms']:.2f} ms, p99 "
                f"{cost['fetch']['wake_p99_ms']:.2f} ms (wall clock)"
            ),
            target_value=50.0,
        ),
    ]


def _versions() -> str:
    import confluent_kafka

    version = confluent_kafka.version()  # a string in 2.16, a (string, int) pair before
    version = version if isinstance(version, str) else version[0]
    return f"{version} (librdkafka {confluent_kafka.libversion()[0]})"


def _topics(plan: Plan) -> dict[str, tuple[int, dict[str, str]]]:
    topics: dict[str, tuple[int, dict[str, str]]] = {
        "kprod": (1, {}),
        "kfetch": (1, {}),
        "kfetch-small": (1, {}),
        "ke2e-low": (1, {}),
    }
    for i in range(plan.e2e_rounds):
        topics[f"ke2e-{i}"] = (1, {})
    from bench.request_cost import cost_topics

    return {**topics, **cost_topics()}


def run(quick: bool = False) -> list:
    """The Kafka metrics (the three beside their peers, then the broker's CPU per small
    request); one broker with a Kafka listener."""
    from harness.broker import BrokerLauncher

    plan = _plan(quick)
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-kafka-"))
    launcher = BrokerLauncher(base)
    metrics = []
    try:
        broker = launcher(_topics(plan), kafka=True)
        metrics.append(_produce_metric(broker, plan))
        metrics.append(_fetch_metric(broker, plan))
        metrics.append(_e2e_metric(broker, plan))
        metrics.extend(_cost_metrics(broker, plan))
    finally:
        with contextlib.suppress(Exception):
            launcher.close()
        shutil.rmtree(base, ignore_errors=True)
    return metrics


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
