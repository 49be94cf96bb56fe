"""Fault-injection suite settings: scenario length, the clusters and the results file.

``make test`` runs every scenario shortened; ``make faults`` (``SLUICE_FAULTS_LONG=1``) runs
them at full length. Each scenario's counts (attempted, acknowledged, failed, unknown, lost,
wrong offset, duplicated, reordered, phantom, divergent, seconds to recover) are printed and
written to ``bench/results/faults.json`` at the end of the session.
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


def long_only(covered_by: str) -> pytest.MarkDecorator:
    """A scenario ``make faults`` runs and ``make test`` skips, because ``covered_by`` (a
    scenario ``make test`` runs) proves the same guarantee through the same broker path."""
    return pytest.mark.skipif(
        not long_run(), reason=f"make faults only (SLUICE_FAULTS_LONG=1); {covered_by}"
    )


@pytest.fixture(scope="package")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    """Control plane, controller and three brokers (default flush policy, every link
    through a proxy: ``FaultCluster(proxied=True)``) shared by every scenario: one
    cluster's start-up instead of one per module; stopped after the last fault scenario."""
    with start_control_plane(tmp_path_factory.mktemp("faults"), FAULT_ENV) as cp:
        cluster = FaultCluster(cp, proxied=True)
        try:
            yield cluster.start()
        finally:
            for b in cluster.brokers.values():
                b.stop()
            cluster.close_proxies()


@pytest.fixture
def cluster(fault_cluster: FaultCluster) -> Iterator[FaultCluster]:
    """The shared cluster, healed (every broker running, every link whole) around each
    scenario."""
    fault_cluster.heal()
    try:
        yield fault_cluster
    finally:
        fault_cluster.heal()


_verdicts: dict[str, dict] = {}
COLUMNS = (
    "attempted: produce attempts; acknowledged / failed: answered so; unknown: never "
    "answered; lost: acknowledged, not in the log; wrong_offset: in the log elsewhere than "
    "acknowledged; duplicated: at two offsets; reordered: a producer's acknowledged offsets "
    "on a partition not rising in send order; phantom: in the log, never attempted; "
    "divergent: below the HW a replica differs from the leader, a hole, or a read later "
    "replaced; seconds_to_recover: slowest fault to the first acknowledgement of a record "
    "sent after it on every partition; replicas_compared: partition replicas read raw"
)


@pytest.fixture
def report() -> Iterator:
    """``report(verdict)`` prints the counts, stores them for faults.json and asserts the
    history is clean."""

    def record(verdict: Verdict, **extra) -> None:
        verdict.extra.update(extra)
        print(verdict.summary())
        _verdicts[verdict.name] = verdict.counts()
        problems = {name: found[:10] for name, found in verdict.problems().items()}
        assert not problems, f"{verdict.summary()}\nfirst of each: {problems}"
        assert verdict.replicas_compared >= 3, "every scenario compares every replica"

    yield record


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _verdicts:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    scenarios = {}
    try:  # a run of some scenarios keeps the others' last results (same length and columns)
        old = json.loads(RESULTS.read_text())
        if old.get("long") == long_run() and old.get("columns") == COLUMNS:
            scenarios.update(old.get("scenarios") or {})
    except (OSError, ValueError):
        pass
    scenarios.update(_verdicts)
    doc = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "long": long_run(),
        "columns": COLUMNS,
        "scenarios": dict(sorted(scenarios.items())),
    }
    RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
