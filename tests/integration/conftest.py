"""Real broker processes for integration tests (the harness is ``harness.broker``).

``broker_factory(topics=..., **options)`` starts ``python -m brokernodes`` on a free loopback
port with a generated static metadata file in a tmp dir, waits for ``/readyz`` (bounded), and
returns a ``BrokerProcess``; every process it started is stopped when the test ends.
``broker`` is one broker with the default topics.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.broker import (
    API_KEY,
    CLUSTER_ID,
    DEFAULT_TOPICS,
    KEY_ID,
    SECRET,
    BrokerLauncher,
    BrokerProcess,
    free_port,
    make_metadata,
)

# Tests import these from here as well as from the harness.
__all__ = [
    "API_KEY",
    "CLUSTER_ID",
    "DEFAULT_TOPICS",
    "KEY_ID",
    "SECRET",
    "BrokerLauncher",
    "BrokerProcess",
    "broker",
    "broker_factory",
    "free_port",
    "make_metadata",
    "module_broker",
]


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerLauncher]:
    """``broker_factory(topics=..., extra_args=[...], env={...})`` -> a running
    ``BrokerProcess``; all are stopped after the test."""
    launcher = BrokerLauncher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
def broker(broker_factory: BrokerLauncher) -> BrokerProcess:
    """One broker with ``DEFAULT_TOPICS``, fresh for this test."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with ``DEFAULT_TOPICS`` shared by a test module (faster; tests must not
    assume empty partitions)."""
    launcher = BrokerLauncher(tmp_path_factory.mktemp("module-broker"))
    try:
        yield launcher()
    finally:
        launcher.close()
