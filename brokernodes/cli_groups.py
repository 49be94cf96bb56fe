"""``sluice groups list|describe|reset-offsets|delete``: consumer groups from the brokers
(``AsyncGroupAdmin``), with lag per partition, as ``kafka-consumer-groups`` shows them.

``reset-offsets`` prints the plan and changes nothing unless ``--execute`` is given (Kafka's
``--dry-run`` default); it needs an inactive group.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson

from brokernodes.cli_text import format_duration
from brokernodes.client.group_consumer import AsyncGroupAdmin

STRATEGIES = {
    "to_earliest": "earliest",
    "to_latest": "latest",
    "to_offset": "offset",
    "to_datetime": "datetime",
    "shift_by": "shift-by",
    "by_duration": "by-duration",
}


def add_groups_command(commands: argparse._SubParsersAction) -> None:
    groups = commands.add_parser(
        "groups",
        help="list, describe, reset and delete consumer groups",
        description="Consumer groups, with lag per partition (offset lag and time lag).",
    )
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the groups with state, members and lag")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    describe = actions.add_parser("describe", help="members, assignments and lag per partition")
    describe.add_argument("group")
    describe.add_argument("--format", choices=("text", "json"), default="text")
    reset = actions.add_parser(
        "reset-offsets",
        help="plan (default) or --execute an offset reset of an inactive group",
    )
    reset.add_argument("group")
    reset.add_argument("--topic", required=True)
    reset.add_argument("--partitions", help="comma-separated partition numbers (default all)")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int, metavar="OFFSET")
    how.add_argument("--to-datetime", metavar="RFC3339", help="e.g. 2026-11-23T12:00:00Z")
    how.add_argument("--shift-by", type=int, metavar="N")
    how.add_argument("--by-duration", metavar="ISO8601", help="e.g. PT1H30M")
    reset.add_argument("--execute", action="store_true", help="apply the plan")
    reset.add_argument("--format", choices=("text", "json"), default="text")
    delete = actions.add_parser("delete", help="delete an inactive group and its offsets")
    delete.add_argument("group")


def _ms(value: int | None) -> str | None:
    return None if value is None else format_duration(value / 1000)


def _dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(
            c, justify="left" if c in ("group", "topic", "member", "state") else "right"
        )
    for r in rows:
        table.add_row(*[_dash(v) for v in r])
    Console().print(table)


def _json(doc: Any) -> None:
    import sys

    sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
    sys.stdout.flush()


async def _run(args: argparse.Namespace) -> int:
    async with AsyncGroupAdmin(args.url, args.api_key) as admin:
        if args.groups_command == "list":
            rows = await admin.list_groups()
            if args.format == "json":
                _json(rows)
            else:
                _table(
                    "consumer groups",
                    ["group", "state", "members", "lag", "health"],
                    [
                        [g["group_id"], g["state"], g["members"], g["total_lag"], g["health"]]
                        for g in rows
                    ],
                )
            return 0
        if args.groups_command == "describe":
            d = await admin.describe_group(args.group)
            if args.format == "json":
                _json(d)
                return 0
            owners = {
                (a["topic"], a["partition"]): m["member_id"]
                for m in d["members"]
                for a in m["assignments"]
            }
            _table(
                f"group {d['group_id']} ({d['state']}, coordinator {d['coordinator']}, "
                f"total lag {d['total_lag']})",
                ["topic", "partition", "committed", "log end", "lag", "time lag", "member"],
                [
                    [
                        r["topic"],
                        r["partition"],
                        r["committed_offset"],
                        r["log_end_offset"],
                        r["lag"],
                        _ms(r["time_lag_ms"]),
                        owners.get((r["topic"], r["partition"])),
                    ]
                    for r in d["offsets"]
                ],
            )
            return 0
        if args.groups_command == "delete":
            await admin.delete_group(args.group)
            print(f"deleted group {args.group}")
            return 0
        strategy, value = next(
            (s, getattr(args, k))
            for k, s in STRATEGIES.items()
            if getattr(args, k) not in (None, False)
        )
        if value is True:
            value = None
        partitions = (
            [int(p) for p in args.partitions.split(",") if p.strip()] if args.partitions else None
        )
        result = await admin.reset_offsets(
            args.group,
            args.topic,
            strategy,
            value,
            partitions=partitions,
            dry_run=not args.execute,
        )
        if args.format == "json":
            _json(result)
            return 0
        _table(
            f"reset of {args.group} on {args.topic}: "
            + ("applied" if result["applied"] else "dry run (add --execute to apply)"),
            ["topic", "partition", "current", "target", "delta"],
            [
                [r["topic"], r["partition"], r["current"], r["target"], r["delta"]]
                for r in result["plan"]
            ],
        )
        return 0


def cmd_groups(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
