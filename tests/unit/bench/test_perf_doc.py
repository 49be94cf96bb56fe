"""bench/perf_doc.py: docs/performance.md's tables rebuilt from the results files."""

from __future__ import annotations

import json

import pytest

from bench import perf_doc
from bench.perf_doc import (
    BENCH_END,
    BENCH_START,
    FAULTS_END,
    FAULTS_START,
    PerfDocError,
    latest_metrics,
    render,
)

PAGE = (
    f"# title\n\nprose\n\n{BENCH_START}\nold\n{BENCH_END}\n\nmiddle\n\n"
    f"{FAULTS_START}\n{FAULTS_END}\n"
)


def metric(name, value, **extra):
    return {
        "name": name,
        "value": value,
        "unit": "records/s",
        "better": "higher",
        "workload": "w",
        "met": None,
        **extra,
    }


def write_run(path, stamp, metrics):
    path.write_text(json.dumps({"generated_at": stamp, "machine": {"cpus": 2}, "metrics": metrics}))


def test_each_metric_comes_from_the_newest_run_that_measured_it(tmp_path):
    write_run(tmp_path / "a.json", "2026-01-01T00:00:00Z", [metric("x", 1), metric("y", 2)])
    write_run(tmp_path / "b.json", "2026-02-01T00:00:00Z", [metric("x", 3)])
    got = {
        m.metric["name"]: (m.metric["value"], m.generated_at[:10]) for m in latest_metrics(tmp_path)
    }
    assert got == {"x": (3, "2026-02-01"), "y": (2, "2026-01-01")}


def test_render_fills_both_tables_and_keeps_the_prose(tmp_path):
    write_run(
        tmp_path / "latest.json",
        "2026-03-04T05:06:07Z",
        [
            metric(
                "produce.x",
                1234567.0,
                peer="redis",
                peer_value=1000000.0,
                ratio=1.235,
                target_ratio=1.0,
                met=True,
            )
        ],
    )
    (tmp_path / "faults.json").write_text(
        json.dumps(
            {
                "generated_at": "2026-03-04T00:00:00Z",
                "long": True,
                "scenarios": {"kill-leader": {"attempted": 10, "acknowledged": 9, "lost": 0}},
            }
        )
    )
    out = render(PAGE, tmp_path)
    assert out.startswith("# title\n\nprose\n\n") and "\nmiddle\n" in out
    assert "old" not in out
    row = next(line for line in out.splitlines() if "`produce.x`" in line)
    assert "1,234,567 records/s" in row and "1.24" in row and "ratio ≥ 1.0" in row
    assert "| yes |" in row and "2026-03-04, 2 CPUs" in row
    assert "- `produce.x`: w; peer: redis" in out
    fault_row = next(line for line in out.splitlines() if "`kill-leader`" in line)
    assert fault_row.startswith("| `kill-leader` | 10 | 9 |")
    assert "long run" in out
    assert render(out, tmp_path) == out  # idempotent: a second pass changes nothing


def test_no_results_says_how_to_make_them(tmp_path):
    out = render(PAGE, tmp_path)
    assert "run `make bench`" in out and "`make faults` writes it" in out


def test_one_section_run_updates_its_rows_and_keeps_the_others(tmp_path):
    # the page as a full run on another machine wrote it
    write_run(tmp_path / "full.json", "2026-01-01T00:00:00Z", [metric("a.x", 1), metric("b.y", 2)])
    (tmp_path / "faults.json").write_text(
        json.dumps({"generated_at": "2026-01-01T00:00:00Z", "scenarios": {"kill": {"lost": 0}}})
    )
    page = render(PAGE, tmp_path)
    # a fresh checkout: only the new run's file, for one of the two metrics, and no faults.json
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    write_run(fresh / "latest.json", "2026-02-01T00:00:00Z", [metric("b.y", 5)])
    out = render(page, fresh)
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["a.x", "b.y", "kill"]
    assert "| 1 records/s |" in rows[0] and "2026-01-01" in rows[0]
    assert "| 5 records/s |" in rows[1] and "2026-02-01" in rows[1]
    assert out.count("- `a.x`: w") == 1 and out.count("- `b.y`: w") == 1
    assert "| `kill` |" in out and "`make faults` writes it" not in out
    assert render(out, fresh) == out


def test_a_page_without_markers_is_refused(tmp_path):
    with pytest.raises(PerfDocError, match="lacks the markers"):
        render("# no markers\n", tmp_path)


def test_a_broken_results_file_names_itself(tmp_path):
    (tmp_path / "latest.json").write_text("{not json")
    with pytest.raises(PerfDocError, match=r"latest\.json"):
        render(PAGE, tmp_path)


def test_check_mode_reports_a_stale_page_and_writes_nothing(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text(PAGE)
    write_run(tmp_path / "latest.json", "2026-01-01T00:00:00Z", [metric("x", 1)])
    args = ["--doc", str(doc), "--results", str(tmp_path)]
    assert perf_doc.main([*args, "--check"]) == 1
    assert doc.read_text() == PAGE
    assert perf_doc.main(args) == 0
    assert perf_doc.main([*args, "--check"]) == 0


def test_the_committed_page_has_its_markers():
    text = perf_doc.DOC.read_text()
    for marker in (BENCH_START, BENCH_END, FAULTS_START, FAULTS_END):
        assert marker in text


def test_transaction_scenarios_get_a_table_of_their_own(tmp_path):
    (tmp_path / "faults.json").write_text(
        json.dumps(
            {
                "generated_at": "2026-03-04T00:00:00Z",
                "long": False,
                "scenarios": {
                    "kill-leader": {"attempted": 10, "acknowledged": 10, "lost": 0},
                    "txn-ctp": {"inputs": 300, "txn_committed": 24, "uncommitted_read": 0},
                },
            }
        )
    )
    out = render(PAGE, tmp_path)
    lines = out.splitlines()
    txn_row = next(line for line in lines if "`txn-ctp`" in line)
    assert txn_row.startswith("| `txn-ctp` | 300 | 24 |  |")  # not in the counts: blank
    assert "| 0 |" in txn_row
    assert lines.index(txn_row) > lines.index(next(x for x in lines if "`kill-leader`" in x))
    assert "| transactions scenario | inputs | txn committed |" in out
    assert "offsets apart: the group's committed offsets" in out


def test_each_rounds_figures_are_printed_and_kept_off_the_page(tmp_path):
    from bench.report import Metric, format_table

    m = Metric("produce.x", 3.0, "records/s", "higher", "w", "redis", 2.0, rounds="3k vs 2k")
    assert format_table([m]).endswith("- produce.x: w; peer: redis; rounds: 3k vs 2k")
    write_run(
        tmp_path / "latest.json",
        "2026-03-04T05:06:07Z",
        [metric("produce.x", 3.0, peer="redis", rounds="3k vs 2k")],
    )
    out = render(PAGE, tmp_path)
    assert "- `produce.x`: w; peer: redis\n" in out and "3k vs 2k" not in out
