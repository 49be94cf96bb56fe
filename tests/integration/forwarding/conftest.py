"""Three real brokers on loopback (static metadata, leaders round-robin) for the "one front
door" tests: every call goes to one broker, whatever leads the partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.broker import BrokerLauncher
from harness.cluster import StaticCluster, start_static_cluster

# keyed: 12 partitions, broker 1 leads 0, 3, 6, 9; far: broker 1 leads none of them
TOPICS = {
    "keyed": (12, {}),
    "far": (3, {}),
    "streams": (2, {}),
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
}
LEADERS = {"far": [2, 3, 2], "streams": [2, 3]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StaticCluster]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("forwarding"))
    try:
        yield start_static_cluster(launcher, TOPICS, leaders=LEADERS)
    finally:
        launcher.close()


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[BrokerLauncher]:
    launcher = BrokerLauncher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.close()
