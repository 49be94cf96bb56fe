"""``sluice``: the Sluice command line, on the Python SDK.

    sluice topics list|describe TOPIC
    sluice topics create|alter|add-partitions|delete TOPIC   (control plane)
    sluice acls list|create|delete                           (control plane)
    sluice groups list|describe|reset-offsets|delete GROUP
    sluice produce TOPIC            lines from stdin
    sluice consume TOPIC            records to stdout
    sluice bench produce|consume|e2e TOPIC

Connection settings come from ``--url`` / ``SLUICE_URL`` and ``--api-key`` /
``SLUICE_API_KEY`` (never printed). Errors go to stderr as one readable line; the exit code is
1 for a failed operation, 2 for bad usage, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import gc
import os
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from brokernodes.cli_admin import (
    AdminUsageError,
    add_acls_command,
    add_topic_admin_actions,
    cmd_acls,
    run_topic_admin,
)
from brokernodes.cli_groups import add_groups_command, cmd_groups
from brokernodes.client.admin import AsyncAdmin
from brokernodes.client.consumer import AsyncConsumer, Consumer, TopicPartition
from brokernodes.client.metadata import ClusterMetadata
from brokernodes.client.producer import PRODUCE_MODES, AsyncProducer, Producer
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    BufferFullError,
    SluiceError,
)

DEFAULT_URL = "http://127.0.0.1:9092"
EXIT_FAILED = 1
EXIT_USAGE = 2
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


class UsageError(Exception):
    """Bad command-line input found after parsing (exit code 2)."""


# --- argument parsing ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice",
        description="Produce to, consume from and benchmark a Sluice cluster.",
        epilog=(
            "Examples:\n"
            "  export SLUICE_URL=http://127.0.0.1:9092 SLUICE_API_KEY=sk_id.secret\n"
            "  sluice topics list\n"
            "  printf 'k1:hello\\nk2:world\\n' | sluice produce orders --key-separator :\n"
            "  sluice consume orders --from-beginning --format json\n"
            "  sluice bench produce orders --count 1000000"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("SLUICE_URL") or DEFAULT_URL,
        help="a broker's base URL, or several separated by commas "
        f"(env SLUICE_URL; default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("SLUICE_API_KEY"),
        help="API key <key_id>.<secret> (env SLUICE_API_KEY; prefer the variable, "
        "command lines are visible to other users)",
    )
    parser.add_argument(
        "--cluster",
        default=os.environ.get("SLUICE_CLUSTER"),
        help="expected cluster id (env SLUICE_CLUSTER): refuse to run against another cluster",
    )
    parser.add_argument(
        "--control-plane",
        default=os.environ.get("SLUICE_CONTROL_PLANE_URL"),
        help="the control plane's base URL for topic and ACL changes "
        "(env SLUICE_CONTROL_PLANE_URL; default http://127.0.0.1:8000)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    topics = commands.add_parser(
        "topics",
        help="list, describe, create, alter and delete topics",
        description="List and describe topics from the brokers' metadata; create, alter, "
        "grow and delete them through the control plane (--control-plane).",
    )
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    listing = topic_commands.add_parser("list", help="topics with partition counts")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    describe = topic_commands.add_parser("describe", help="a topic's partitions and offsets")
    describe.add_argument("topic")
    describe.add_argument("--format", choices=("text", "json"), default="text")
    add_topic_admin_actions(topic_commands)
    add_acls_command(commands)
    add_groups_command(commands)

    produce = commands.add_parser(
        "produce",
        help="send lines from stdin as records",
        description="Read lines from stdin and send each as one record (the line without "
        "its newline is the value). Prints a summary to stderr.",
    )
    produce.add_argument("topic")
    produce.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value (a line without SEP is an error)",
    )
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K=V",
        help="add a header to every record (repeatable)",
    )
    _producer_options(produce)
    produce.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")

    consume = commands.add_parser(
        "consume",
        help="print records to stdout",
        description="Print a topic's records. Without --follow it prints what is there (from "
        "the beginning unless told otherwise) and exits; with --follow it keeps waiting for "
        "new records (from the end unless told otherwise) until Ctrl-C.",
    )
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start")
    start.add_argument("--offset", type=int, metavar="N", help="start at offset N")
    start.add_argument(
        "--timestamp",
        metavar="TIME",
        help="start at the first record at or after TIME (ISO 8601, e.g. "
        "2026-11-23T12:00:00Z, or epoch milliseconds)",
    )
    consume.add_argument("--partition", type=int, help="only this partition (default: all)")
    consume.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    consume.add_argument("-n", "--max-records", type=int, metavar="N", help="stop after N records")
    consume.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the value per line (with --print-key: key, tab, value); json: one object "
        "per line with topic, partition, offset, timestamp, key, value, headers",
    )
    consume.add_argument("--print-key", action="store_true", help="text format: key first")
    consume.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="stop after S seconds"
    )

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
        sub.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
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
            _producer_options(sub)
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
    return parser


def _producer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--acks", choices=("0", "1", "all"), default="1")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none")
    parser.add_argument("--batch-size", type=int, default=16384, metavar="BYTES")
    parser.add_argument("--linger-ms", type=float, default=5, metavar="MS")
    parser.add_argument(
        "--produce-mode",
        choices=PRODUCE_MODES,
        default="http",
        help="producer send path: one HTTP POST per request, or binary frames on an open "
        "WebSocket produce stream (lower latency; needs acks 1 or all; default http, "
        "websocket for bench e2e)",
    )


# --- entry point -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "topics":
            if args.topics_command not in ("list", "describe"):
                return run_topic_admin(args)
            return cmd_topics(args)
        if args.command == "acls":
            return cmd_acls(args)
        if args.command == "groups":
            return cmd_groups(args)
        if args.command == "produce":
            return cmd_produce(args)
        if args.command == "consume":
            return cmd_consume(args)
        if args.command == "bench":
            return cmd_bench(args)
    except (UsageError, AdminUsageError) as exc:
        parser.exit(EXIT_USAGE, f"sluice: error: {exc}\n")
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("sluice: interrupted", file=sys.stderr)
        return 130
    except (SluiceError, ValueError) as exc:
        print(f"sluice: error: {describe_error(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_USAGE


def describe_error(exc: BaseException) -> str:
    """One line a person can act on; never includes the API key."""
    if isinstance(exc, BrokerConnectionError):
        return f"{exc.message}"
    if isinstance(exc, BrokerError):
        text = f"{exc.error_code}: {exc.message}"
        if exc.error_code == "UNAUTHENTICATED":
            text += " (check --api-key / SLUICE_API_KEY)"
        elif exc.error_code == "NOT_FOUND" and exc.url:
            text += " (is --url / SLUICE_URL a Sluice broker?)"
        return text
    if isinstance(exc, SluiceError):
        return str(exc)
    return str(exc)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _check_cluster(args: argparse.Namespace, metadata: ClusterMetadata | None) -> None:
    if args.cluster and metadata is not None and metadata.cluster_id != args.cluster:
        raise SluiceError(
            f"{args.url} serves cluster {metadata.cluster_id!r}, not {args.cluster!r} "
            f"(--cluster / SLUICE_CLUSTER)"
        )


# --- topics ------------------------------------------------------------------------------------


def cmd_topics(args: argparse.Namespace) -> int:
    metadata = asyncio.run(_fetch_metadata(args))
    _check_cluster(args, metadata)
    if args.topics_command == "list":
        rows = [
            {"name": t.name, "partitions": t.num_partitions, "topic_id": t.topic_id}
            for t in sorted(metadata.topics.values(), key=lambda t: t.name)
        ]
        if args.format == "json":
            _write_json_line(rows)
            return 0
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"topics in cluster {metadata.cluster_id}")
        table.add_column("topic")
        table.add_column("partitions", justify="right")
        for row in rows:
            table.add_row(row["name"], str(row["partitions"]))
        Console().print(table)
        return 0
    info = metadata.topic(args.topic)
    parts = [
        {
            "partition": p.partition,
            "leader": p.leader,
            "leader_url": metadata.brokers.get(p.leader) if p.leader is not None else None,
            "replicas": list(p.replicas),
            "log_start_offset": p.log_start_offset,
            "log_end_offset": p.log_end_offset,
            "high_watermark": p.high_watermark,
        }
        for p in info.partitions
    ]
    if args.format == "json":
        _write_json_line({"name": info.name, "topic_id": info.topic_id, "partitions": parts})
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"topic {info.name} ({info.topic_id})")
    for column in ("partition", "leader", "replicas", "log start", "high watermark", "log end"):
        table.add_column(column, justify="right" if column != "leader" else "left")
    for p in parts:
        leader = "none" if p["leader"] is None else f"{p['leader']} {p['leader_url'] or ''}"
        table.add_row(
            str(p["partition"]),
            leader.strip(),
            ",".join(map(str, p["replicas"])),
            _or_dash(p["log_start_offset"]),
            _or_dash(p["high_watermark"]),
            _or_dash(p["log_end_offset"]),
        )
    Console().print(table)
    return 0


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


async def _fetch_metadata(args: argparse.Namespace) -> ClusterMetadata:
    async with AsyncAdmin(args.url, args.api_key, request_timeout_ms=15_000) as admin:
        return await admin.describe_cluster()


# --- produce -----------------------------------------------------------------------------------


def _parse_headers(values: list[str]) -> list[tuple[str, bytes]]:
    headers = []
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--header {item!r} is not of the form name=value")
        headers.append((name, value.encode()))
    return headers


def _producer_config(args: argparse.Namespace) -> dict[str, Any]:
    if args.batch_size <= 0:
        raise UsageError("--batch-size must be positive")
    if args.linger_ms < 0:
        raise UsageError("--linger-ms must be >= 0")
    if args.produce_mode == "websocket" and args.acks == "0":
        raise UsageError("--produce-mode websocket needs --acks 1 or all (answers are the acks)")
    return {
        "acks": args.acks,
        "compression": args.compression,
        "batch_size": args.batch_size,
        "linger_ms": args.linger_ms,
        "produce_mode": args.produce_mode,
    }


def cmd_produce(args: argparse.Namespace) -> int:
    headers = _parse_headers(args.header)
    separator = args.key_separator.encode() if args.key_separator else None
    if args.key_separator == "":
        raise UsageError("--key-separator must not be empty")
    producer = Producer(args.url, args.api_key, **_producer_config(args))
    failures: list[BaseException] = []
    sent = 0

    def on_delivery(error: BaseException | None, _meta: Any) -> None:
        if error is not None:
            failures.append(error)

    try:
        _check_cluster(args, producer.metadata)
        producer.metadata.topic(args.topic)  # fail before reading stdin
        stdin = sys.stdin.buffer
        for number, line in enumerate(stdin, 1):
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            key = None
            if separator is not None:
                key, sep, value = line.partition(separator)
                if not sep:
                    producer.flush()
                    raise UsageError(
                        f"line {number} has no key separator {args.key_separator!r}; "
                        f"{sent} records before it were sent"
                    )
            else:
                value = line
            producer.send(
                args.topic,
                value,
                key=key,
                headers=headers or None,
                partition=args.partition,
                on_delivery=on_delivery,
            )
            sent += 1
            if failures:
                break
        producer.flush()
    finally:
        producer.close()
    if failures:
        ok = sent - len(failures)
        print(
            f"sluice: error: {len(failures)} of {sent} records failed ({ok} delivered); "
            f"first error: {describe_error(failures[0])}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not args.quiet:
        print(f"produced {sent} records to {args.topic}", file=sys.stderr)
    return 0


# --- consume -----------------------------------------------------------------------------------


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from ``1732363200000`` or ISO 8601 (naive means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--timestamp {text!r} is neither epoch milliseconds nor ISO 8601 "
            f"(e.g. 2026-11-23T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _text(data: bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


def _json_field(record: dict, name: str, data: bytes | None) -> None:
    if data is None:
        record[name] = None
        return
    try:
        record[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        record[name] = base64.b64encode(data).decode()
        record[f"{name}_encoding"] = "base64"


def format_record(record: Any, fmt: str, print_key: bool) -> bytes:
    if fmt == "json":
        out: dict[str, Any] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
        }
        _json_field(out, "key", record.key)
        _json_field(out, "value", record.value)
        out["headers"] = [
            {"name": k, "value": None if v is None else _text(v)} for k, v in record.headers
        ]
        return orjson.dumps(out) + b"\n"
    value = record.value if record.value is not None else b""
    if print_key:
        return (record.key or b"") + b"\t" + value + b"\n"
    return value + b"\n"


def cmd_consume(args: argparse.Namespace) -> int:
    if args.max_records is not None and args.max_records <= 0:
        raise UsageError("--max-records must be positive")
    timestamp = parse_timestamp(args.timestamp) if args.timestamp else None
    consumer = Consumer(
        args.url,
        args.api_key,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500 if args.follow else 100,
    )
    out = sys.stdout.buffer
    written = 0
    try:
        _check_cluster(args, consumer.metadata)
        tps = consumer.partitions_for(args.topic)
        if args.partition is not None:
            if not 0 <= args.partition < len(tps):
                raise UsageError(
                    f"--partition {args.partition}: topic {args.topic} has {len(tps)} "
                    f"partitions (0..{len(tps) - 1})"
                )
            tps = [TopicPartition(args.topic, args.partition)]
        consumer.assign(tps)
        if args.offset is not None:
            for tp in tps:
                consumer.seek(tp, args.offset)
        elif timestamp is not None:
            consumer.seek_to_timestamp(timestamp)
        elif args.from_beginning or not args.follow:
            consumer.seek_to_beginning()
        else:
            consumer.seek_to_end()
        # Without --follow, stop at the ends as they are now.
        ends = None if args.follow else consumer.end_offsets(tps)
        remaining = set(tps)
        if ends is not None:
            remaining = {tp for tp in tps if consumer.position(tp) < ends[tp]}
        deadline = time.monotonic() + args.timeout if args.timeout else None
        while args.follow or remaining:
            if deadline is not None and time.monotonic() >= deadline:
                break
            for record in consumer.poll(0.5):
                out.write(format_record(record, args.format, args.print_key))
                written += 1
                if args.max_records is not None and written >= args.max_records:
                    out.flush()
                    return 0
            out.flush()
            if ends is not None:
                remaining = {tp for tp in remaining if consumer.position(tp) < ends[tp]}
    finally:
        consumer.close()
    return 0


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
        _write_json_line(result)
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


def _write_json_line(doc: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
    sys.stdout.flush()


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
        **_producer_config(args),
    )
    await producer.start()
    _check_cluster(args, producer.metadata)
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
        _check_cluster(args, consumer.metadata)
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
        **_producer_config(args),
    )
    consumer = AsyncConsumer(
        args.url, args.api_key, fetch_max_wait_ms=100, fetch_mode=args.fetch_mode
    )
    await producer.start()
    await consumer.start()
    latencies: list[float] = []
    try:
        _check_cluster(args, producer.metadata)
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


if __name__ == "__main__":
    raise SystemExit(main())
