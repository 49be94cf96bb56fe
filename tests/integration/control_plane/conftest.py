"""The ``control_plane`` fixture: a real control plane (``harness.control_plane``: a
temp SQLite database, ``manage.py runserver`` on a free port, brokers and controllers pulling
metadata from it), stopped with everything it started when the test ends. Override
``control_plane_env`` (e.g. with ``FAST_FAILOVER_ENV``) to change its environment.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.broker import free_port
from harness.control_plane import (
    FAST_FAILOVER_ENV,
    ROOT,
    SECRET,
    ControlPlane,
    Proc,
    http,
    start_control_plane,
    wait_for,
)

# Tests import these from here as well as from the harness.
__all__ = [
    "FAST_FAILOVER_ENV",
    "ROOT",
    "SECRET",
    "ControlPlane",
    "Proc",
    "control_plane",
    "control_plane_env",
    "free_port",
    "http",
    "start_control_plane",
    "wait_for",
]


@pytest.fixture
def control_plane_env() -> dict[str, str]:
    """Extra environment for ``control_plane``; override it (e.g. ``FAST_FAILOVER_ENV``)."""
    return {}


@pytest.fixture
def control_plane(tmp_path, control_plane_env) -> Iterator[ControlPlane]:
    with start_control_plane(tmp_path, control_plane_env) as cp:
        yield cp
