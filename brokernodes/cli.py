"""The ``sluice`` command line (placeholder entry point until the CLI lands)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("sluice: the CLI is being built; see README.md", file=sys.stderr)
    return 2
