"""The ``sluice`` commands that go to the control plane rather than the brokers:

    sluice topics create TOPIC [--partitions N] [--replication-factor R] [--config k=v ...]
    sluice topics alter TOPIC [--config k=v ...] [--delete-config k ...]
    sluice topics add-partitions TOPIC --partitions N
    sluice topics delete TOPIC
    sluice acls list|create|delete

They use ``--control-plane`` / ``SLUICE_CONTROL_PLANE_URL`` and the same API key as the data
plane. ``--validate-only`` asks the control plane to check without changing anything. Field
errors are printed one per line under the error, as the control plane gives them.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from brokernodes.cli_text import plural
from brokernodes.client.control import ControlPlane

OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
)
RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER")


class AdminUsageError(ValueError):
    """Bad command-line input found after parsing (exit code 2)."""


def add_topic_admin_actions(topic_commands: argparse._SubParsersAction) -> None:
    create = topic_commands.add_parser("create", help="create a topic (control plane)")
    create.add_argument("topic")
    create.add_argument(
        "--partitions", type=int, help="default: the control plane's (as the console's)"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        help="default: the control plane's, capped by the live brokers (as the console's)",
    )
    _config_options(create)
    alter = topic_commands.add_parser("alter", help="change a topic's configs (control plane)")
    alter.add_argument("topic")
    _config_options(alter)
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="NAME",
        help="remove an override, back to the default (repeatable)",
    )
    grow = topic_commands.add_parser(
        "add-partitions", help="grow a topic to N partitions (control plane)"
    )
    grow.add_argument("topic")
    grow.add_argument("--partitions", type=int, required=True, help="the new total")
    grow.add_argument("--validate-only", action="store_true")
    delete = topic_commands.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("topic")


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config, e.g. retention.ms=3600000 (repeatable)",
    )
    parser.add_argument("--validate-only", action="store_true", help="check only; change nothing")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def add_acls_command(commands: argparse._SubParsersAction) -> None:
    acls = commands.add_parser(
        "acls",
        help="list, create and delete ACLs (control plane)",
        description="ACLs with Kafka's semantics: DENY wins, no match means deny. Needs an "
        "admin service account's key.",
    )
    actions = acls.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the organisation's ACLs")
    listing.add_argument("--principal")
    listing.add_argument("--resource-type", choices=RESOURCE_TYPES)
    listing.add_argument("--resource-name")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    create = actions.add_parser("create", help="add an ACL binding")
    create.add_argument("--principal", required=True, help="e.g. User:my-service")
    create.add_argument("--resource-type", choices=RESOURCE_TYPES, required=True)
    create.add_argument("--resource-name", required=True, help="a name, a prefix, or *")
    create.add_argument("--pattern-type", choices=("LITERAL", "PREFIXED"), default="LITERAL")
    create.add_argument("--operation", choices=OPERATIONS, required=True)
    create.add_argument("--permission", choices=("ALLOW", "DENY"), default="ALLOW")
    create.add_argument("--host", default="*", help="a client IP address, or * (default)")
    create.add_argument("--format", choices=("text", "json"), default="text")
    delete = actions.add_parser("delete", help="remove an ACL binding by id")
    delete.add_argument("acl_id")


def control_plane(args: argparse.Namespace) -> ControlPlane:
    """The control plane at ``--control-plane``; the API URL ``make up`` prints
    (``.../api/v1/``) is taken as the control plane's base URL too."""
    url = args.control_plane
    if url:
        url = url.rstrip("/").removesuffix("/api/v1")
    return ControlPlane(url, args.api_key)


def run_topic_admin(args: argparse.Namespace) -> int:
    """``topics create|alter|add-partitions|delete``; prints what the control plane answered."""
    cp = control_plane(args)
    action = args.topics_command
    if action == "delete":
        cp.delete_topic(args.topic)
        print(f"deleted topic {args.topic}")
        return 0
    if action == "create":
        topic = cp.create_topic(
            args.topic,
            args.partitions,
            args.replication_factor,
            _configs(args.config),
            validate_only=args.validate_only,
        )
        verb = "would create" if args.validate_only else "created"
    elif action == "alter":
        changes: dict[str, str | None] = dict(_configs(args.config))
        changes.update({name: None for name in args.delete_config})
        if not changes:
            raise AdminUsageError("nothing to change: give --config NAME=VALUE or --delete-config")
        topic = cp.alter_topic_configs(args.topic, changes, validate_only=args.validate_only)
        verb = "would alter" if args.validate_only else "altered"
    else:
        topic = cp.add_partitions(args.topic, args.partitions, validate_only=args.validate_only)
        verb = "would grow" if args.validate_only else "grew"
    if getattr(args, "format", "text") == "json":
        print(orjson.dumps(topic).decode())
        return 0
    configs = ", ".join(f"{k}={v}" for k, v in sorted((topic.get("configs") or {}).items()))
    print(
        f"{verb} topic {topic['name']} (id {topic['topic_id']}): "
        f"{plural(int(topic['partitions']), 'partition')}, "
        f"replication factor {topic['replication_factor']}"
        + (f"; configs {configs}" if configs else "")
    )
    return 0


def cmd_acls(args: argparse.Namespace) -> int:
    cp = control_plane(args)
    if args.acls_command == "delete":
        cp.delete_acl(args.acl_id)
        print(f"deleted ACL {args.acl_id}")
        return 0
    if args.acls_command == "create":
        rows = [
            cp.create_acl(
                args.principal,
                args.resource_type,
                args.resource_name,
                args.operation,
                args.permission,
                pattern_type=args.pattern_type,
                host=args.host,
            )
        ]
    else:
        rows = cp.list_acls(
            principal=args.principal,
            resource_type=args.resource_type,
            resource_name=args.resource_name,
        )
    if args.format == "json":
        for row in rows:
            print(orjson.dumps(row).decode())
        return 0
    for row in rows:
        print(_acl_line(row))
    if not rows:
        print("no ACLs match")
    return 0


def _acl_line(row: dict[str, Any]) -> str:
    pattern = "prefixed" if row["pattern_type"] == "PREFIXED" else "literal"
    return (
        f"{row['id']}  {row['permission']} {row['principal']} from {row['host']}: "
        f"{row['operation']} on {row['resource_type']} {row['resource_name']!r} ({pattern})"
    )


def _configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise AdminUsageError(f"--config takes NAME=VALUE, not {item!r}")
        configs[name.strip()] = value
    return configs
