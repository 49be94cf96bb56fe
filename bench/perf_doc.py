"""Regenerate the figures in docs/performance.md from the results files in bench/results/.

``make bench`` writes ``latest.json`` and a dated copy per run (bench/report.py), one section
or all; ``make faults`` writes ``faults.json``. The page's tables are rebuilt from those files
so that no figure in the docs is kept by hand: each metric shows its most recent measurement,
whichever run of whichever section made it. Results files stay on the machine that made them,
so a metric (or the fault table) no results file here holds keeps what the page shows: one
section run on a fresh checkout updates its own rows only. Only the text between the page's
markers changes.

``python -m bench.perf_doc [--check]``: rewrite the page, or with ``--check`` exit 1 when the
page differs from what the results files give.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.report import RESULTS_DIR

DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
BENCH_START = "<!-- bench-table:start (bench/perf_doc.py writes this part) -->"
BENCH_END = "<!-- bench-table:end -->"
FAULTS_START = "<!-- faults-table:start (bench/perf_doc.py writes this part) -->"
FAULTS_END = "<!-- faults-table:end -->"
FAULT_COLUMNS = (
    "attempted",
    "acknowledged",
    "failed",
    "unknown",
    "lost",
    "wrong_offset",
    "duplicated",
    "reordered",
    "phantom",
    "divergent",
    "seconds_to_recover",
)
TXN_COLUMNS_TEXT = (
    "inputs: records the consume-transform-produce worker had to process; txn committed / "
    "aborted / fenced: transactions the worker was told so; txn open: killed before asking to "
    "commit; txn unknown: asked, never answered; uncommitted read: an output of a transaction "
    "that never committed read by a read_committed consumer; phantom: an output no "
    "transaction wrote; partial: some but not all of a transaction's outputs committed; "
    "committed missing: a commit the worker was told of, not all in the log; duplicated / "
    "missing: an input's output committed twice / never; offsets apart: the group's "
    "committed offsets disagree with the committed outputs"
)
TXN_FAULT_COLUMNS = (
    "inputs",
    "txn_committed",
    "txn_aborted",
    "txn_fenced",
    "txn_open",
    "txn_unknown",
    "uncommitted_read",
    "phantom",
    "partial",
    "committed_missing",
    "duplicated",
    "missing",
    "offsets_apart",
)


class PerfDocError(Exception):
    """The page or a results file is not in the shape this generator needs."""


@dataclass(frozen=True)
class Measured:
    """One metric as its latest run recorded it, with the run's date and machine."""

    metric: dict
    generated_at: str
    cpus: int | None
    quick: bool = False


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PerfDocError(
            f"{path}: not a readable results file ({exc}); delete or fix it"
        ) from exc


def latest_metrics(results_dir: Path = RESULTS_DIR) -> list[Measured]:
    """Every metric found in the run files, each from the newest run that measured it."""
    newest: dict[str, Measured] = {}
    for path in sorted(results_dir.glob("*.json")):
        doc = _load(path)
        if "metrics" not in doc:
            continue  # faults.json and other reports
        stamp = str(doc.get("generated_at", ""))
        cpus = (doc.get("machine") or {}).get("cpus")
        for metric in doc["metrics"]:
            seen = newest.get(metric["name"])
            if seen is None or stamp >= seen.generated_at:
                newest[metric["name"]] = Measured(metric, stamp, cpus, bool(doc.get("quick")))
    return [newest[name] for name in sorted(newest)]


def _figure(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"
    return f"{text} {unit}".strip()


def _target(m: dict) -> str:
    sign = "≥" if m.get("better") == "higher" else "≤"
    parts = []
    if m.get("target_ratio") is not None:
        parts.append(f"ratio {sign} {m['target_ratio']}")
    if m.get("target_value") is not None:
        parts.append(f"{sign} {_figure(m['target_value'], m.get('unit', ''))}")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(item: Measured) -> str:
    m = item.metric
    met = {True: "yes", False: "**no**", None: ""}[m.get("met")]
    when = item.generated_at[:10] + (f", {item.cpus} CPUs" if item.cpus else "")
    when += ", quick run" if item.quick else ""
    cells = (
        f"`{m['name']}`",
        _figure(m["value"], m.get("unit", "")),
        _figure(m.get("peer_value")),
        "" if m.get("ratio") is None else f"{m['ratio']:.2f}",
        _target(m),
        met,
        when,
    )
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _detail(item: Measured) -> str:
    m = item.metric
    return f"- `{m['name']}`: {_cell(m.get('workload', ''))}" + (
        f"; peer: {_cell(m['peer'])}" if m.get("peer") else ""
    )


def shown_metrics(section: str) -> dict[str, tuple[str, str | None]]:
    """The metrics a generated bench table already shows: name -> (table row, detail line)."""
    rows: dict[str, str] = {}
    details: dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            rows[line.split("`")[1]] = line
        elif line.startswith("- `"):
            details[line.split("`")[1]] = line
    return {name: (row, details.get(name)) for name, row in rows.items()}


def bench_table(
    measured: list[Measured], kept: dict[str, tuple[str, str | None]] | None = None
) -> str:
    """The benchmark figures as a Markdown table, then each metric's workload and peer.

    ``kept``: rows the page shows for metrics no results file here measured (a fresh
    checkout holds none: results files stay on the machine that made them), kept as they
    are, so that running one section updates its own rows and leaves the others'."""
    lines = {i.metric["name"]: (_row(i), _detail(i)) for i in measured}
    for name, shown in (kept or {}).items():
        lines.setdefault(name, shown)
    if not lines:
        return (
            "No benchmark results file in `bench/results/` yet: run `make bench` (or one section, "
            "`make bench BENCH=<section>`) and this table is written from its results."
        )
    names = sorted(lines)
    rows = [
        "| metric | value | peer value | ratio | target | met | measured |",
        "|---|---|---|---|---|---|---|",
        *(lines[name][0] for name in names),
    ]
    details = [lines[name][1] for name in names if lines[name][1] is not None]
    return "\n".join([*rows, "", *details])


def faults_table(results_dir: Path = RESULTS_DIR, shown: str | None = None) -> str:
    """The fault suite's counts per scenario (bench/results/faults.json) as a Markdown table;
    without that file, ``shown`` (what the page shows) when it holds a table."""
    path = results_dir / "faults.json"
    if not path.exists():
        if shown and "| scenario |" in shown:
            return shown
        return "No `bench/results/faults.json` yet: `make faults` writes it."
    doc = _load(path)
    scenarios = doc.get("scenarios")
    if not isinstance(scenarios, dict):
        raise PerfDocError(f"{path}: no 'scenarios' object; rerun `make faults`")
    length = "long run (`make faults`)" if doc.get("long") else "short run"
    rows = [
        f"Fault suite, {length}, {str(doc.get('generated_at', ''))[:10]}:",
        "",
        "| scenario | " + " | ".join(c.replace("_", " ") for c in FAULT_COLUMNS) + " |",
        "|---|" + "---|" * len(FAULT_COLUMNS),
    ]
    txn = sorted(name for name, counts in scenarios.items() if "uncommitted_read" in counts)
    for name in sorted(scenarios):
        if name in txn:
            continue
        counts = scenarios[name]
        cells = ["" if counts.get(c) is None else str(counts[c]) for c in FAULT_COLUMNS]
        rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
    if doc.get("columns"):
        rows += ["", _cell(str(doc["columns"]))]
    if txn:  # the transactions checker's own counts (tests/faults/txn_history.py)
        rows += [
            "",
            "| transactions scenario | "
            + " | ".join(c.replace("_", " ") for c in TXN_FAULT_COLUMNS)
            + " |",
            "|---|" + "---|" * len(TXN_FAULT_COLUMNS),
        ]
        for name in txn:
            counts = scenarios[name]
            cells = ["" if counts.get(c) is None else str(counts[c]) for c in TXN_FAULT_COLUMNS]
            rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
        rows += ["", TXN_COLUMNS_TEXT]
    return "\n".join(rows)


def _split(text: str, start: str, end: str) -> tuple[str, str, str]:
    """(before ``start``, the generated part, from ``end`` on) of the page."""
    head, sep, rest = text.partition(start)
    old, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise PerfDocError(f"docs/performance.md lacks the markers {start!r} ... {end!r}")
    return head, old.strip("\n"), tail


def _replace_between(text: str, start: str, end: str, body: str) -> str:
    head, _old, tail = _split(text, start, end)
    return f"{head}{start}\n{body}\n{end}{tail}"


def render(text: str, results_dir: Path = RESULTS_DIR) -> str:
    """The page's text with both generated parts rebuilt from ``results_dir``; what the
    page shows of metrics and fault runs the results files lack is kept."""
    kept = shown_metrics(_split(text, BENCH_START, BENCH_END)[1])
    text = _replace_between(
        text, BENCH_START, BENCH_END, bench_table(latest_metrics(results_dir), kept)
    )
    shown = _split(text, FAULTS_START, FAULTS_END)[1]
    return _replace_between(text, FAULTS_START, FAULTS_END, faults_table(results_dir, shown))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perf_doc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report whether it is current")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    try:
        old = args.doc.read_text()
        new = render(old, args.results)
    except (OSError, PerfDocError) as exc:
        print(f"perf_doc: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            print(f"{args.doc} is not current: run `python -m bench.perf_doc`", file=sys.stderr)
            return 1
        return 0
    if new != old:
        args.doc.write_text(new)
    print(f"{args.doc}: figures from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
