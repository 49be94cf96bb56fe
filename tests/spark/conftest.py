"""One local Spark session for the whole test run (starting one costs 7-8 s, more under
load), plus the broker fixtures of tests/integration for the tests that read real brokers."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.integration.conftest import broker_factory  # noqa: F401  (fixture)

logging.getLogger("py4j").setLevel(logging.WARNING)  # no "closing" chatter at exit


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from spark.session import get_session

    session = get_session("local[2]", "sluice-tests", **{"spark.sql.shuffle.partitions": "2"})
    try:
        yield session
    finally:
        session.stop()
