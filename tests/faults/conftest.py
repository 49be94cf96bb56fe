"""Fault-injection suite settings: scenario length and the results file.

``make test`` runs every scenario shortened; ``make faults`` (``SLUICE_FAULTS_LONG=1``) runs
them at full length. Each scenario's counts (attempted,
acknowledged, lost, duplicated, divergent) are printed and written to
``bench/results/faults.json`` at the end of the session.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.cluster import FAULT_ENV, FaultCluster
from tests.faults.history import Verdict
from tests.integration.conftest import broker_factory  # noqa: F401 - fixture
from tests.integration.control_plane.conftest import start_control_plane

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "faults.json"


def long_run() -> bool:
    """Full-length scenarios (``make faults``) instead of the short ones ``make test`` runs."""
    return os.environ.get("SLUICE_FAULTS_LONG") == "1"


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    """Control plane, controller and three brokers shared by a module's scenarios."""
    with start_control_plane(tmp_path_factory.mktemp("faults"), FAULT_ENV) as cp:
        yield FaultCluster(cp).start()


@pytest.fixture
def cluster(fault_cluster: FaultCluster) -> Iterator[FaultCluster]:
    """The module's cluster, healed (every broker running) after each scenario."""
    fault_cluster.heal()
    try:
        yield fault_cluster
    finally:
        fault_cluster.heal()


_verdicts: dict[str, dict] = {}


@pytest.fixture
def report() -> Iterator:
    """``report(verdict)`` prints the counts, stores them for faults.json and asserts the
    history is clean."""

    def record(verdict: Verdict, **extra) -> None:
        verdict.extra.update(extra)
        print(verdict.summary())
        _verdicts[verdict.name] = verdict.counts()
        assert not verdict.lost, f"acknowledged records lost: {verdict.lost[:20]}"
        assert not verdict.duplicated, f"duplicated values: {verdict.duplicated[:20]}"
        assert not verdict.divergent, f"offsets with two values: {verdict.divergent[:20]}"
        assert not verdict.divergent_reads, (
            f"reads of records later replaced (above the HW): {verdict.divergent_reads[:20]}"
        )

    yield record


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _verdicts:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    scenarios = {}
    try:  # a run of some scenarios keeps the others' last results (same length only)
        old = json.loads(RESULTS.read_text())
        if old.get("long") == long_run():
            scenarios.update(old.get("scenarios") or {})
    except (OSError, ValueError):
        pass
    scenarios.update(_verdicts)
    doc = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "long": long_run(),
        "scenarios": dict(sorted(scenarios.items())),
    }
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
