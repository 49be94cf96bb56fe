"""The benchmark results file (bench/results/latest.json) and the table printed beside it."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class Metric:
    """One measured figure; ``ratio`` is value / peer_value when there is a peer."""

    name: str
    value: float
    unit: str
    better: str  # "higher" or "lower"
    workload: str
    peer: str | None = None
    peer_value: float | None = None
    target_ratio: float | None = None
    target_value: float | None = None
    ratio: float | None = None
    # each round's figures beside the peer's: the run's log, kept in the results file and the
    # console table, not in docs/performance.md (which shows the median and the method)
    rounds: str | None = None

    def __post_init__(self) -> None:
        if self.peer_value:
            self.ratio = round(self.value / self.peer_value, 3)

    @property
    def met(self) -> bool | None:
        """Whether every target set is met (ratio and/or absolute value); None if none set."""
        checks = []
        higher = self.better == "higher"
        if self.target_ratio is not None and self.ratio is not None:
            checks.append(
                self.ratio >= self.target_ratio if higher else self.ratio <= self.target_ratio
            )
        if self.target_value is not None:
            checks.append(
                self.value >= self.target_value if higher else self.value <= self.target_value
            )
        return all(checks) if checks else None


def run_times(runs: list[float]) -> str:
    """Each timed run's seconds, for a metric's ``rounds``."""
    return " / ".join(f"{r:.2f}" for r in runs) + " s"


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_results(metrics: list[Metric], *, quick: bool = False) -> Path:
    """Write latest.json (and a dated copy) and return the path of latest.json; ``quick``
    marks a short run (``--quick``), whose figures are rougher."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    commit = _git_commit()
    doc = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": quick,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "git_commit": commit,
        },
        "metrics": [{**asdict(m), "met": m.met} for m in metrics],
    }
    text = json.dumps(doc, indent=2)
    latest = RESULTS_DIR / "latest.json"
    latest.write_text(text)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    (RESULTS_DIR / f"{stamp}-{commit[:8]}.json").write_text(text)
    return latest


def format_table(metrics: list[Metric]) -> str:
    """A table a person can read: metric, value, peer, ratio against target."""
    rows = [("metric", "value", "peer value", "ratio", "target", "met")]
    for m in metrics:
        sign = "≥ " if m.better == "higher" else "≤ "
        targets = []
        if m.target_ratio is not None:
            targets.append(f"ratio {sign}{m.target_ratio}")
        if m.target_value is not None:
            targets.append(f"{sign}{m.target_value} {m.unit}")
        target = ", ".join(targets)
        rows.append(
            (
                m.name,
                f"{m.value:,.3f} {m.unit}",
                "" if m.peer_value is None else f"{m.peer_value:,.3f}",
                "" if m.ratio is None else f"{m.ratio:.3f}",
                target,
                {True: "yes", False: "NO", None: ""}[m.met],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    details = [
        f"- {m.name}: {m.workload}"
        + (f"; peer: {m.peer}" if m.peer else "")
        + (f"; rounds: {m.rounds}" if m.rounds else "")
        for m in metrics
    ]
    return "\n".join([*lines, "", *details])
