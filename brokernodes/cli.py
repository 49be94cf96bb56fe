"""``sluice``: the Sluice command line, on the Python SDK.

    sluice topics list|describe TOPIC
    sluice topics create|alter|add-partitions|delete TOPIC   (control plane)
    sluice acls list|create|delete                           (control plane)
    sluice groups list|describe|reset-offsets|delete GROUP
    sluice produce TOPIC            lines from stdin
    sluice consume TOPIC...         records to stdout (--group G: as a group member, committing)
    sluice bench produce|consume|e2e TOPIC

Connection settings come from ``--url`` / ``SLUICE_URL`` (a broker), ``--control-plane`` /
``SLUICE_CONTROL_PLANE_URL`` (the control plane, for topic and ACL changes) and ``--api-key`` /
``SLUICE_API_KEY`` (never printed). Errors go to stderr as one readable line; the exit code is
1 for a failed operation, 2 for bad usage, 130 on Ctrl-C.

This module parses the command line and runs ``topics list|describe``, ``produce`` and
``consume``; the control-plane actions are ``cli_admin``'s, ``groups`` is ``cli_groups``'s,
``bench`` is ``cli_bench``'s, and what they share is ``cli_common``'s. ``consume --group`` is
``cli_group_consume``'s, ``topics describe`` ``cli_describe``'s; ``cli_parser`` adds "did you
mean" to argparse, ``cli_url`` explains a ``--url`` that is not a broker, ``cli_text`` holds
durations and plurals, ``cli_progress`` the progress line.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import os
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
from brokernodes.cli_bench import add_bench_command, cmd_bench
from brokernodes.cli_common import (
    EXIT_FAILED,
    EXIT_USAGE,
    UsageError,
    add_producer_options,
    check_cluster,
    describe_error,
    producer_config,
    write_json_line,
)
from brokernodes.cli_describe import describe_topic, render
from brokernodes.cli_group_consume import consume_group
from brokernodes.cli_groups import add_groups_command, cmd_groups
from brokernodes.cli_parser import SluiceParser, duration
from brokernodes.cli_progress import RecordProgress
from brokernodes.cli_text import plural
from brokernodes.cli_url import diagnose
from brokernodes.client.admin import AsyncAdmin
from brokernodes.client.consumer import Consumer, TopicPartition
from brokernodes.client.metadata import ClusterMetadata
from brokernodes.client.producer import Producer
from brokernodes.errors import BrokerError, SluiceError

DEFAULT_URL = "http://127.0.0.1:9092"


# --- argument parsing ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = SluiceParser(
        prog="sluice",
        description="Produce to, consume from and benchmark a Sluice cluster.",
        epilog=(
            "Examples:\n"
            "  export SLUICE_URL=http://127.0.0.1:9092 SLUICE_API_KEY=sk_id.secret\n"
            "  export SLUICE_CONTROL_PLANE_URL=http://127.0.0.1:8000\n"
            "  sluice topics list\n"
            "  printf 'k1:hello\\nk2:world\\n' | sluice produce orders --key-separator :\n"
            "  sluice consume orders --from-beginning --format json\n"
            "  sluice consume orders --group billing --follow\n"
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
    describe = topic_commands.add_parser(
        "describe",
        help="a topic's partitions: leader, replicas, ISR, offsets; its overridden configs",
        description="Leader, replicas and ISR of each partition from the metadata; log start "
        "offset and high watermark asked of each partition's leader; the topic's overridden "
        "configs.",
    )
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
    add_producer_options(produce)
    produce.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")

    consume = commands.add_parser(
        "consume",
        help="print records to stdout (--group G: as a member of group G, committing)",
        description="Print the records of one or more topics. Without --follow it prints what "
        "is there (from the beginning unless told otherwise) and exits; with --follow it keeps "
        "waiting for new records (from the end unless told otherwise) until Ctrl-C. With "
        "--group G it consumes as a member of consumer group G: the group assigns the "
        "partitions (several processes with the same G share them), each starts at the "
        "group's committed offset, and what was printed is committed periodically and on exit.",
    )
    consume.add_argument("topics", nargs="+", metavar="TOPIC")
    consume.add_argument(
        "-g", "--group", metavar="G", help="consume as a member of consumer group G and commit"
    )
    consume.add_argument(
        "--from",
        dest="start",
        choices=("earliest", "latest"),
        help="with --group: where a partition without a committed offset starts (default "
        "earliest, latest with --follow)",
    )
    consume.add_argument(
        "--commit-interval",
        type=duration,
        default=5.0,
        metavar="DURATION",
        help="with --group: commit what was printed this often (default 5s; also on exit)",
    )
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
    consume.add_argument(
        "-n",
        "--max-records",
        "--max-messages",
        type=int,
        metavar="N",
        help="stop after N records",
    )
    consume.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the value per line (with --print-key: key, tab, value); json: one object "
        "per line with topic, partition, offset, timestamp, key, value, headers",
    )
    consume.add_argument("--print-key", action="store_true", help="text format: key first")
    consume.add_argument(
        "--timeout",
        type=duration,
        default=None,
        metavar="DURATION",
        help="stop after this long: 30s, 5m, 1h, 250ms (a bare number is seconds)",
    )
    consume.add_argument(
        "-q", "--quiet", action="store_true", help="with --group: no group messages on stderr"
    )
    add_bench_command(commands)
    return parser


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
        print(f"sluice: error: {_explain(args, exc)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_USAGE


def _explain(args: argparse.Namespace, exc: BaseException) -> str:
    """The error's own line, or what ``--url`` really is when a broker's answer made no sense
    (an HTML page parsed as JSON, a 404 for a broker path)."""
    not_json = isinstance(exc, ValueError) and not isinstance(exc, SluiceError)
    not_found = isinstance(exc, BrokerError) and exc.error_code == "NOT_FOUND"
    if not_json or not_found:
        found = diagnose(args.url)
        if found:
            return found
    return describe_error(exc)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


# --- topics ------------------------------------------------------------------------------------


def cmd_topics(args: argparse.Namespace) -> int:
    if args.topics_command == "describe":
        described = asyncio.run(describe_topic(args.url, args.api_key, args.topic))
        if args.cluster and described["cluster_id"] != args.cluster:
            raise SluiceError(
                f"{args.url} serves cluster {described['cluster_id']!r}, not {args.cluster!r} "
                f"(--cluster / SLUICE_CLUSTER)"
            )
        if args.format == "json":
            write_json_line(described)
        else:
            render(described)
        return 0
    metadata = asyncio.run(_fetch_metadata(args))
    check_cluster(args, metadata)
    if args.topics_command == "list":
        rows = [
            {"name": t.name, "partitions": t.num_partitions, "topic_id": t.topic_id}
            for t in sorted(metadata.topics.values(), key=lambda t: t.name)
        ]
        if args.format == "json":
            write_json_line(rows)
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


def cmd_produce(args: argparse.Namespace) -> int:
    headers = _parse_headers(args.header)
    separator = args.key_separator.encode() if args.key_separator else None
    if args.key_separator == "":
        raise UsageError("--key-separator must not be empty")
    producer = Producer(args.url, args.api_key, **producer_config(args))
    failures: list[BaseException] = []
    sent = 0

    def on_delivery(error: BaseException | None, _meta: Any) -> None:
        if error is not None:
            failures.append(error)

    try:
        check_cluster(args, producer.metadata)
        producer.metadata.topic(args.topic)  # fail before reading stdin
        with RecordProgress(f"produce {args.topic}", None, records_on_stdout=False) as bar:
            for number, line in enumerate(sys.stdin.buffer, 1):
                if line.endswith(b"\n"):
                    line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                key = None
                if separator is not None:
                    key, sep, value = line.partition(separator)
                    if not sep:
                        producer.flush()
                        raise UsageError(
                            f"line {number} has no key separator {args.key_separator!r}; "
                            f"{plural(sent, 'record')} before it were sent"
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
                if sent % 1000 == 0:
                    bar.advance(1000)
                if failures:
                    break
            producer.flush()
    finally:
        producer.close()
    if failures:
        ok = sent - len(failures)
        print(
            f"sluice: error: {len(failures)} of {plural(sent, 'record')} failed ({ok} "
            f"delivered); first error: {describe_error(failures[0])}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not args.quiet:
        print(f"produced {plural(sent, 'record')} to {args.topic}", file=sys.stderr)
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
    args.topics = list(dict.fromkeys(args.topics))
    out = sys.stdout.buffer
    if args.group:
        return asyncio.run(
            consume_group(args, lambda r: format_record(r, args.format, args.print_key), out)
        )
    if args.start is not None:
        raise UsageError("--from goes with --group; without it use --from-beginning or --offset")
    if args.partition is not None and len(args.topics) > 1:
        raise UsageError("--partition needs a single topic")
    timestamp = parse_timestamp(args.timestamp) if args.timestamp else None
    consumer = Consumer(
        args.url,
        args.api_key,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=500 if args.follow else 100,
    )
    written = 0
    try:
        check_cluster(args, consumer.metadata)
        tps = [tp for topic in args.topics for tp in consumer.partitions_for(topic)]
        if args.partition is not None:
            if not 0 <= args.partition < len(tps):
                raise UsageError(
                    f"--partition {args.partition}: topic {args.topics[0]} has "
                    f"{plural(len(tps), 'partition')} (0..{len(tps) - 1})"
                )
            tps = [TopicPartition(args.topics[0], args.partition)]
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
        with RecordProgress(
            f"consume {', '.join(args.topics)}", args.max_records, records_on_stdout=True
        ) as bar:
            while args.follow or remaining:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                records = consumer.poll(0.5)
                for record in records:
                    out.write(format_record(record, args.format, args.print_key))
                    written += 1
                    if args.max_records is not None and written >= args.max_records:
                        out.flush()
                        return 0
                out.flush()
                bar.advance(len(records))
                if ends is not None:
                    remaining = {tp for tp in remaining if consumer.position(tp) < ends[tp]}
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
