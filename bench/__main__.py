"""``python -m bench [section|all] [--quick]``: run benchmark sections, write latest.json."""

from __future__ import annotations

import argparse
import importlib
import sys

from bench.report import format_table, write_results

SECTIONS = [
    "storage",
    "broker",
    "idempotent",
    "durable",
    "nats_peer",
    "replication",
    "groups",
    "spark",
    "quotas",
    "kafka",
    "transactions",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("section", nargs="?", default="all", choices=[*SECTIONS, "all"])
    parser.add_argument("--quick", action="store_true", help="a short run, well under a minute")
    args = parser.parse_args(argv)
    sections = SECTIONS if args.section == "all" else [args.section]
    metrics = []
    for name in sections:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name} ==", flush=True)
        metrics.extend(module.run(quick=args.quick))
    path = write_results(metrics, quick=args.quick)
    print(format_table(metrics))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
