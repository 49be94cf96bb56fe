"""What the ``sluice`` commands share: exit codes, usage errors, error text, producer options."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from brokernodes.client.metadata import ClusterMetadata
from brokernodes.client.producer import PRODUCE_MODES
from brokernodes.errors import BrokerConnectionError, BrokerError, SluiceError

EXIT_FAILED = 1
EXIT_USAGE = 2
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


class UsageError(Exception):
    """Bad command-line input found after parsing (exit code 2)."""


def add_producer_options(parser: argparse.ArgumentParser) -> None:
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


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
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


def check_cluster(args: argparse.Namespace, metadata: ClusterMetadata | None) -> None:
    if args.cluster and metadata is not None and metadata.cluster_id != args.cluster:
        raise SluiceError(
            f"{args.url} serves cluster {metadata.cluster_id!r}, not {args.cluster!r} "
            f"(--cluster / SLUICE_CLUSTER)"
        )


def write_json_line(doc: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
    sys.stdout.flush()
