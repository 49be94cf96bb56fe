"""``SLUICE_BENCH_SMOKE=1``: every section shrinks to seconds, to check that it runs (its
figures mean nothing). bench/kafka.py reads the same variable."""

from __future__ import annotations

import os


def smoke() -> bool:
    """Whether this run only checks that the benchmarks work."""
    return os.environ.get("SLUICE_BENCH_SMOKE") == "1"
