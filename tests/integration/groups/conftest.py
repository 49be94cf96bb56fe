"""Brokers with ``__consumer_offsets`` for the consumer-group tests, and a small cluster of
three static-metadata brokers that know each other (leaders spread over them)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

import pytest

from tests.integration.conftest import (
    DEFAULT_TOPICS,
    BrokerLauncher,
    BrokerProcess,
    free_port,
    make_metadata,
)

OFFSETS = ("__consumer_offsets", (4, {"cleanup.policy": "compact"}))
GROUP_TOPICS = {**DEFAULT_TOPICS, "__consumer_offsets": OFFSETS[1], "sixty": (12, {})}


def wait_for(what: str, check: Callable[[], object], timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


@pytest.fixture
def gbroker(broker_factory: BrokerLauncher) -> BrokerProcess:
    """One broker with the default topics, ``sixty`` (12 partitions) and __consumer_offsets."""
    return broker_factory(GROUP_TOPICS)


def start_cluster(
    launcher: BrokerLauncher, topics: dict[str, tuple[int, dict[str, str]]], n: int = 3
) -> list[BrokerProcess]:
    """``n`` brokers sharing one metadata document (each with its own broker id); partition
    ``i`` of every topic is led by broker ``i % n + 1``."""
    ports = [free_port() for _ in range(n)]
    brokers = [{"id": i + 1, "url": f"http://127.0.0.1:{ports[i]}"} for i in range(n)]
    leaders = {name: [p % n + 1 for p in range(parts)] for name, (parts, _) in topics.items()}
    out = []
    for i in range(n):
        doc = make_metadata(ports[i], topics, broker_id=i + 1, leaders=leaders)
        doc["brokers"] = brokers
        out.append(launcher(metadata=doc, port=ports[i], name=f"b{i + 1}"))
    return out


def http_json(method: str, url: str, body=None, *, key: str, timeout: float = 10.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else {})
    except urllib.error.HTTPError as e:
        raw = e.read()
        e.close()
        return e.code, (json.loads(raw) if raw else {})
