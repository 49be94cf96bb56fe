"""``sluice consume TOPIC... --group G``: consume as a member of consumer group G and commit,
as ``kcat -G`` and ``kafka-console-consumer --group`` do.

The member (``AsyncGroupConsumer``) gets its partitions from the group's coordinator, so
several ``sluice consume --group G`` processes share the partitions of the topics between
them. Each assigned partition starts at the group's committed offset, or where ``--from``
says (earliest or latest) when the group has none.

What is committed is what was printed: ``poll`` is asked for at most the records still
wanted (``--max-records``), every record it returns is written and stdout flushed before the
next ``poll``, and the SDK's auto-commit commits the position after the last record an
earlier ``poll`` returned: every ``--commit-interval``, before a partition is handed to
another member (a rebalance) and, explicitly here, on exit (end of the records without
``--follow``, ``--max-records``, ``--timeout``, Ctrl-C). At-least-once: a process killed
with SIGKILL re-delivers what it printed since its last commit.

Without ``--follow`` a member stops once it is caught up: an empty ``poll`` with every
assigned partition's position at that partition's high watermark (asked of its leader).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from brokernodes.cli_common import UsageError, check_cluster
from brokernodes.cli_progress import RecordProgress
from brokernodes.cli_text import format_duration, plural
from brokernodes.client.admin import AsyncAdmin
from brokernodes.client.group_consumer import AsyncGroupConsumer
from brokernodes.client.metadata import TopicPartition

NO_ASSIGNMENT_GIVE_UP_S = 15.0  # without --follow: a member the group gives nothing stops


def check_group_args(args: argparse.Namespace) -> None:
    for flag, value in (
        ("--partition", args.partition),
        ("--offset", args.offset),
        ("--timestamp", args.timestamp),
    ):
        if value is not None:
            raise UsageError(
                f"{flag} does not go with --group: a group member consumes the partitions the "
                f"group assigns it, from the group's committed offsets (move them with "
                f"'sluice groups reset-offsets {args.group} --topic T ...')"
            )


def _tp_text(tps: Any) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "none"


async def consume_group(
    args: argparse.Namespace, format_record: Callable[[Any], bytes], out: BinaryIO
) -> int:
    check_group_args(args)
    start = args.start
    if start is None:
        start = "earliest" if args.from_beginning or not args.follow else "latest"
    say: Callable[[str], None] = (
        (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr))
    )

    def assigned(tps: set[TopicPartition]) -> None:
        say(f"group {args.group}: assigned {_tp_text(tps)}")

    def revoked(tps: set[TopicPartition]) -> None:
        say(f"group {args.group}: revoked {_tp_text(tps)} (positions committed)")

    consumer = AsyncGroupConsumer(
        args.url,
        args.api_key,
        group_id=args.group,
        topics=args.topics,
        auto_offset_reset=start,
        auto_commit_interval_ms=int(args.commit_interval * 1000),
        on_partitions_assigned=assigned,
        on_partitions_revoked=revoked,
        fetch_max_wait_ms=500,
        heartbeat_interval_ms=1000,
    )
    admin = AsyncAdmin(args.url, args.api_key, request_timeout_ms=15_000)
    began = time.monotonic()
    interrupted: asyncio.CancelledError | None = None
    try:
        metadata = await admin.describe_cluster()
        check_cluster(args, metadata)
        for topic in args.topics:
            metadata.topic(topic)  # an unknown topic fails here, naming the known ones
        await consumer.start()
        with RecordProgress(
            f"consume {', '.join(args.topics)} as {args.group}",
            args.max_records,
            records_on_stdout=True,
        ) as bar:
            try:
                await _consume(args, consumer, admin, format_record, out, bar, say)
            except asyncio.CancelledError as exc:  # Ctrl-C: asyncio.run cancels the task
                interrupted = exc
        await consumer.commit()
        committed = await consumer.committed(consumer.assignment())
    finally:
        await consumer.close()
        await admin.close()
    say(
        f"consumed {plural(bar.done, 'record')} in {format_duration(time.monotonic() - began)} "
        f"as group {args.group}; committed {_offsets_text(committed)}"
    )
    if interrupted is not None:
        raise interrupted  # the run ends as interrupted (exit code 130)
    return 0


async def _consume(
    args: argparse.Namespace,
    consumer: AsyncGroupConsumer,
    admin: AsyncAdmin,
    format_record: Callable[[Any], bytes],
    out: BinaryIO,
    bar: RecordProgress,
    say: Callable[[str], None],
) -> None:
    """Poll, print and flush until a stop condition; ``bar.done`` counts what was printed."""
    deadline = time.monotonic() + args.timeout if args.timeout else None
    last_assignment = time.monotonic()
    while True:
        wait = 0.5
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                return
        wanted = None if args.max_records is None else args.max_records - bar.done
        records = await consumer.poll(wait, max_records=wanted)
        for record in records:
            out.write(format_record(record))
        out.flush()
        bar.advance(len(records))
        if args.max_records is not None and bar.done >= args.max_records:
            return
        owned = consumer.assignment()
        if owned:
            last_assignment = time.monotonic()
        if records or args.follow:
            continue
        if not owned:
            if time.monotonic() - last_assignment > NO_ASSIGNMENT_GIVE_UP_S:
                say(f"group {args.group}: no partitions assigned; stopping")
                return
            continue
        if await _caught_up(consumer, admin, owned):
            return


async def _caught_up(
    consumer: AsyncGroupConsumer, admin: AsyncAdmin, owned: set[TopicPartition]
) -> bool:
    ends = await admin.list_offsets({tp: "latest" for tp in owned})
    for tp in owned:
        position = consumer.position(tp)
        if position is None or position < ends[tp].offset:
            return False
    return True


def _offsets_text(committed: dict) -> str:
    if not committed:
        return "nothing (no partitions assigned)"
    return ", ".join(f"{t}-{p}={o}" for (t, p), o in sorted(committed.items()))
