"""``sluice bench produce|consume|e2e``: throughput and latency against a real cluster.

``produce`` measures producer throughput and acknowledgement latency (on a sample of the
records), ``consume`` reads a topic from its beginning, ``e2e`` sends at a fixed rate with
each value stamped by the sender and measures send-to-receive latency on the consumer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import struct
import sys
import time
from typing import Any

from brokernodes.cli_common import (
    EXIT_FAILED,
    UsageError,
    add_producer_options,
    check_cluster,
    describe_error,
    producer_config,
    write_json_line,
)
from brokernodes.cli_parser import duration
from brokernodes.client.consumer import AsyncConsumer
from brokernodes.client.producer import AsyncProducer
from brokernodes.errors import BufferFullError, SluiceError


def add_bench_command(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure throughput and latency",
        description="Benchmarks against a real cluster: produce, consume, or end-to-end "
        "latency at a fixed rate. Prints a summary table (or --format json).",
    )
    bench_commands = bench.add_subparsers(dest="bench_command", metavar="KIND", required=True)
    for name, help_text in (
        ("produce", "producer throughput: records/s, MB/s, acknowledgement latency"),
        ("consume", "consumer throughput from the beginning of the topic"),
        ("e2e", "send-to-receive latency at a fixed rate"),
    ):
        sub = bench_commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("topic")
        sub.add_argument("--record-size", type=int, default=100, metavar="BYTES")
        sub.add_argument("--count", type=int, metavar="N", help="records (default 1000000)")
        sub.add_argument(
            "--duration",
            type=duration,
            metavar="DURATION",
            help="stop after this long: 30s, 5m, 1h (a bare number is seconds)",
        )
        sub.add_argument("--format", choices=("text", "json"), default="text")
        if name != "consume":
            sub.add_argument(
                "--keys", type=int, default=1000, metavar="N", help="distinct keys (0: keyless)"
            )
            sub.add_argument(
                "--buffer-mb",
                type=float,
                default=4,
                metavar="MB",
                help="producer buffer: records waiting beyond it slow the sender down, and "
                "their wait counts in the latency (default 4)",
            )
            add_producer_options(sub)
        sub.add_argument(
            "--loop",
            choices=("asyncio", "uvloop"),
            default="asyncio",
            help="event loop the SDK runs on (default asyncio; uvloop cuts per-request cost)",
        )
        if name != "produce":
            sub.add_argument(
                "--fetch-mode",
                choices=("long_poll", "websocket"),
                default="long_poll",
                help="consumer fetch path: binary long-poll fetches, or the WebSocket consume "
                "stream the broker pushes records on (default: long_poll; websocket for e2e)",
            )
        if name == "e2e":
            sub.add_argument("--rate", type=float, default=10_000, help="records per second")
            # The SDK's lowest-latency settings: send at once, records pushed to the consumer.
            sub.set_defaults(linger_ms=0, fetch_mode="websocket", produce_mode="websocket")


# --- bench -------------------------------------------------------------------------------------


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _bounds(args: argparse.Namespace) -> tuple[int, float | None]:
    count = args.count
    if count is None:
        count = 1_000_000 if args.duration is None else 2**62
    if count <= 0:
        raise UsageError("--count must be positive")
    if args.duration is not None and args.duration <= 0:
        raise UsageError("--duration must be positive")
    if args.record_size < 0:
        raise UsageError("--record-size must be >= 0")
    return count, args.duration


class _Progress:
    """A rich progress bar on stderr (static when stderr is not a terminal)."""

    def __init__(self, description: str, total: int | None, duration: float | None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.by_time = total is None or (duration is not None and total >= 2**62)
        self.duration = duration
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn() if not self.by_time else TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
            disable=not sys.stderr.isatty(),
        )
        self.task = self.progress.add_task(
            description,
            total=(duration if self.by_time else total),
            count="",
            rate="",
        )

    def __enter__(self) -> _Progress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, done: int, elapsed: float) -> None:
        rate = f"{done / elapsed:,.0f} rec/s" if elapsed > 0 else ""
        if self.by_time:
            self.progress.update(
                self.task, completed=min(elapsed, self.duration or 0), count=f"{done:,}", rate=rate
            )
        else:
            self.progress.update(self.task, completed=done, rate=rate)


def _summary(args: argparse.Namespace, title: str, result: dict[str, Any]) -> None:
    if args.format == "json":
        write_json_line(result)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    labels = [
        ("records", "records", "{:,}"),
        ("bytes", "MB", None),
        ("seconds", "seconds", "{:.2f}"),
        ("records_per_s", "records/s", "{:,.0f}"),
        ("mb_per_s", "MB/s", "{:.1f}"),
        ("latency_p50_ms", "latency p50 (ms)", "{:.2f}"),
        ("latency_p99_ms", "latency p99 (ms)", "{:.2f}"),
        ("latency_max_ms", "latency max (ms)", "{:.2f}"),
        ("failed", "failed records", "{:,}"),
    ]
    for key, label, fmt in labels:
        if key not in result or result[key] is None:
            continue
        value = result[key]
        if key == "bytes":
            table.add_row(label, f"{value / 1e6:.1f}")
        else:
            table.add_row(label, fmt.format(value))
    Console().print(table)


def _run(args: argparse.Namespace, coro: Any) -> Any:
    if getattr(args, "loop", "asyncio") == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def cmd_bench(args: argparse.Namespace) -> int:
    count, duration = _bounds(args)
    if args.bench_command == "produce":
        result = _run(args, bench_produce(args, count, duration))
        title = f"bench produce {args.topic}"
    elif args.bench_command == "consume":
        result = _run(args, bench_consume(args, count, duration))
        title = f"bench consume {args.topic}"
    else:
        if args.rate <= 0:
            raise UsageError("--rate must be positive")
        result = _run(args, bench_e2e(args, count, duration))
        title = f"bench e2e {args.topic} at {args.rate:,.0f} records/s"
    _summary(args, title, result)
    return EXIT_FAILED if result.get("failed") else 0


def _keys(n: int) -> list[bytes | None]:
    return [b"key-%06d" % i for i in range(n)] if n > 0 else [None]


async def bench_produce(args: argparse.Namespace, count: int, duration: float | None) -> dict:
    value = os.urandom(args.record_size // 2).hex().encode().ljust(args.record_size, b"x")
    keys = _keys(args.keys)
    nkeys = len(keys)
    latencies: list[float] = []
    failed = [0, None]

    def sampler(started: float):
        def done(error: BaseException | None, _meta: Any) -> None:
            if error is None:
                latencies.append(time.perf_counter() - started)
            else:
                failed[0] += 1
                failed[1] = failed[1] or error

        return done

    def on_error(error: BaseException | None, _meta: Any) -> None:
        if error is not None:
            failed[0] += 1
            failed[1] = failed[1] or error

    producer = AsyncProducer(
        args.url,
        args.api_key,
        buffer_memory=max(1, int(args.buffer_mb * 1_048_576)),
        **producer_config(args),
    )
    await producer.start()
    check_cluster(args, producer.metadata)
    producer.metadata.topic(args.topic)
    sent = 0
    topic = args.topic
    send = producer.send
    started = time.perf_counter()
    end_time = started + duration if duration else None
    try:
        with _Progress("producing", count, duration) as progress:
            next_update = started
            while sent < count:
                chunk = min(count - sent - 1, 1000)
                i = sent
                try:
                    for i in range(sent, sent + chunk):
                        send(topic, value, keys[i % nkeys])
                    i = sent + chunk  # then one sampled for latency
                    send(topic, value, keys[i % nkeys], on_delivery=sampler(time.perf_counter()))
                except BufferFullError:  # the producer's buffer is full: let it drain
                    sent = i
                    await asyncio.sleep(0.001)
                    continue
                sent = i + 1
                await asyncio.sleep(0)
                now = time.perf_counter()
                if now >= next_update:
                    progress.update(sent, now - started)
                    next_update = now + 0.1
                    if end_time is not None and now >= end_time:
                        break
            await producer.flush()
            elapsed = time.perf_counter() - started
            progress.update(sent, elapsed)
    finally:
        await producer.close()
    if failed[1] is not None:
        print(f"sluice: error: first failure: {describe_error(failed[1])}", file=sys.stderr)
    latencies.sort()
    return _result(sent, sent * args.record_size, elapsed, latencies, failed[0])


def _result(
    records: int, nbytes: int, elapsed: float, latencies_s: list[float], failed: int = 0
) -> dict[str, Any]:
    def ms(q: float) -> float | None:
        value = _percentile(latencies_s, q)
        return None if value is None else value * 1000

    return {
        "records": records,
        "bytes": nbytes,
        "seconds": elapsed,
        "records_per_s": records / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": nbytes / elapsed / 1e6 if elapsed > 0 else 0.0,
        "latency_p50_ms": ms(0.50),
        "latency_p99_ms": ms(0.99),
        "latency_max_ms": ms(1.0),
        "failed": failed,
    }


async def bench_consume(args: argparse.Namespace, count: int, duration: float | None) -> dict:
    consumer = AsyncConsumer(
        args.url, args.api_key, auto_offset_reset="earliest", fetch_mode=args.fetch_mode
    )
    await consumer.start()
    try:
        check_cluster(args, consumer.metadata)
        tps = await consumer.partitions_for(args.topic)
        consumer.assign(tps)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(tps)
        available = 0
        for tp in tps:
            available += ends[tp] - await consumer.position(tp)
        target = min(count, available)
        if target <= 0:
            raise SluiceError(
                f"topic {args.topic} has no records to read; run `sluice bench produce "
                f"{args.topic}` first"
            )
        received = 0
        nbytes = 0
        started = time.perf_counter()
        end_time = started + duration if duration else None
        with _Progress("consuming", target, None) as progress:
            while received < target:
                records = await consumer.poll(1.0, min(10_000, target - received))
                if not records:
                    if end_time is not None and time.perf_counter() >= end_time:
                        break
                    continue
                received += len(records)
                nbytes += sum(len(r.value or b"") + len(r.key or b"") for r in records)
                now = time.perf_counter()
                progress.update(received, now - started)
                if end_time is not None and now >= end_time:
                    break
            elapsed = time.perf_counter() - started
    finally:
        await consumer.close()
    return _result(received, nbytes, elapsed, [])


_STAMP = struct.Struct(">d")
WARM_UP_TIMEOUT_S = 30.0
WARM_UP_RECORDS = 1000


async def _e2e_warm_up(
    producer: AsyncProducer, consumer: AsyncConsumer, topic: str, filler: bytes, keys: list
) -> None:
    """Before the clock starts: a record for each of the first keys (up to
    ``WARM_UP_RECORDS``) sent, acknowledged and received, so the produce and consume streams
    are open, as a Redis client's connection is after its first command, and the first
    timed records do not pay for connecting. These records are not counted."""
    value = _STAMP.pack(0.0) + filler
    futures = [await producer.produce(topic, value, key) for key in keys[:WARM_UP_RECORDS]]
    await producer.flush(WARM_UP_TIMEOUT_S)
    for future in futures:
        await future  # raises the delivery error, if any
    expected = len(futures)
    deadline = time.perf_counter() + WARM_UP_TIMEOUT_S
    while expected > 0 and time.perf_counter() < deadline:
        expected -= len(await consumer.poll(0.5))
    if expected > 0:
        raise SluiceError(
            f"the warm-up records sent to {topic} did not come back within "
            f"{WARM_UP_TIMEOUT_S:g}s; is the consumer reading from the partitions' leaders?"
        )


async def bench_e2e(args: argparse.Namespace, count: int, duration: float | None) -> dict:
    if duration is None and args.count is None:
        duration = 10.0
    size = max(args.record_size, _STAMP.size)
    filler = b"x" * (size - _STAMP.size)
    keys = _keys(args.keys)
    producer = AsyncProducer(
        args.url,
        args.api_key,
        buffer_memory=max(1, int(args.buffer_mb * 1_048_576)),
        **producer_config(args),
    )
    consumer = AsyncConsumer(
        args.url, args.api_key, fetch_max_wait_ms=100, fetch_mode=args.fetch_mode
    )
    await producer.start()
    await consumer.start()
    latencies: list[float] = []
    try:
        check_cluster(args, producer.metadata)
        tps = await consumer.partitions_for(args.topic)
        consumer.assign(tps)
        await consumer.seek_to_end()
        for tp in tps:
            await consumer.position(tp)
        await _e2e_warm_up(producer, consumer, args.topic, filler, keys)
        # The progress bar first (its first use imports and builds it: tens of ms that would
        # otherwise fall inside the first timed send and come out as one burst of records)
        with _Progress("end to end", None if duration else count, duration) as progress:
            # Long-lived objects (modules, clients) out of the collector's way: a full
            # collection over them is a pause of milliseconds, which would show in the tail.
            gc.collect()
            gc.freeze()
            rate = args.rate
            sent = 0
            received = 0
            started = time.perf_counter()
            end_time = started + duration if duration else None
            done_sending = asyncio.Event()

            async def send_loop() -> None:
                # The records due by now, each stamped as it is handed to the producer, then
                # a 1 ms sleep: a steady ``rate`` in bursts of a loop turn's worth of records.
                # ``send`` queues without a coroutine per record; ``produce`` only waits on a
                # full buffer.
                nonlocal sent
                perf = time.perf_counter
                send = producer.send
                topic = args.topic
                nkeys = len(keys)
                while sent < count:
                    now = perf()
                    if end_time is not None and now >= end_time:
                        break
                    due = min(count, int((now - started) * rate) + 1)
                    while sent < due:
                        value = _STAMP.pack(perf()) + filler
                        try:
                            send(topic, value, keys[sent % nkeys])
                        except BufferFullError:
                            await producer.produce(topic, value, keys[sent % nkeys])
                        sent += 1
                    await asyncio.sleep(0.001)
                await producer.flush()
                done_sending.set()

            sender = asyncio.create_task(send_loop())
            shown = started  # the progress bar is redrawn ten times a second, not per poll
            unpack = _STAMP.unpack_from
            stamp_size = _STAMP.size
            while True:
                records = await consumer.poll(0.2)
                now = time.perf_counter()
                for r in records:
                    value = r.value
                    if value and len(value) >= stamp_size:
                        latencies.append(now - unpack(value)[0])
                received += len(records)
                if now - shown >= 0.1:
                    shown = now
                    progress.update(received, now - started)
                if done_sending.is_set() and received >= sent:
                    break
                if done_sending.is_set() and now - started > (duration or 0) + 30:
                    break  # records lost or never visible: stop waiting
            await sender
            elapsed = time.perf_counter() - started
            progress.update(received, elapsed)
    finally:
        await producer.close()
        await consumer.close()
    latencies.sort()
    result = _result(received, received * size, elapsed, latencies)
    result["sent"] = sent
    result["failed"] = max(0, sent - received)
    return result
