"""``python -m bench [section|all] [--quick] [--native]``: run benchmark sections, write
latest.json. ``--native`` (or ``SLUICE_NATIVE=1``) runs the brokers with the compiled hot
modules (docs/native-build.md; build them first with ``make native``); the results record
which modules that was under ``"native"``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from bench.report import format_table, write_results
from brokernodes import native

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
    parser.add_argument(
        "--native",
        action="store_true",
        help="brokers with the compiled hot modules (SLUICE_NATIVE=1; `make native` first)",
    )
    args = parser.parse_args(argv)
    if args.native:
        # Broker processes inherit the environment (harness.broker); the finder is
        # installed by brokernodes/__init__.py in each of them.
        os.environ[native.ENV_FLAG] = "1"
    run_native = native_state()
    if run_native["enabled"]:
        print(f"native: {len(run_native['modules'])} compiled modules", flush=True)
    sections = SECTIONS if args.section == "all" else [args.section]
    metrics = []
    for name in sections:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name} ==", flush=True)
        metrics.extend(module.run(quick=args.quick))
    path = write_results(metrics, quick=args.quick)
    record_native(path, run_native)
    print(format_table(metrics))
    print(f"\nresults: {path}")
    return 0


def native_state() -> dict:
    """Whether the brokers run compiled modules and which: the manifest's modules whose
    source is unchanged (the ones a broker's finder loads compiled)."""
    if not native.enabled():
        return {"enabled": False, "modules": []}
    return {"enabled": True, "modules": native.NativeFinder(native.build_dir()).matching()}


def record_native(latest: Path, state: dict) -> None:
    """Add ``"native"`` to latest.json and its dated copy (written with the same text)."""
    text = latest.read_text()
    copies = [p for p in latest.parent.glob("*.json") if p != latest and p.read_text() == text]
    doc = json.loads(text)
    doc["native"] = state
    out = json.dumps(doc, indent=2)
    for p in [latest, *copies]:
        p.write_text(out)


if __name__ == "__main__":
    sys.exit(main())
