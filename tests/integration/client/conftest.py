"""One real broker shared by the SDK and CLI tests of a module (started with the helpers of
tests/integration/conftest.py); each test uses its own topics, so tests do not interfere."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest

from tests.integration.conftest import BrokerProcess, free_port, make_metadata

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CLIENT_TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    **{f"rt-{codec}": (3, {}) for codec in CODECS},
    "keyed": (4, {}),
    "idem": (1, {}),
    "idem-sync": (2, {}),
    "seek": (1, {}),
    "reset": (1, {}),
    "tail": (2, {}),
    "sync": (3, {}),
    "cli-text": (2, {}),
    "cli-json": (1, {}),
    "cli-bench": (2, {}),
    "cli-ts": (1, {}),
    "tiny": (1, {"max.message.bytes": "2048"}),
    "ws-order": (3, {}),
    "ws-credit": (1, {}),
    "ws-tail": (2, {}),
    "ws-range": (1, {}),
    "ws-produce": (4, {}),
    "ws-sync": (1, {}),
    "ws-idem": (1, {}),
    "ws-silent": (1, {}),
}


@pytest.fixture(scope="module")
def client_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("client-broker")
    port = free_port()
    doc = make_metadata(port, CLIENT_TOPICS)
    metadata_path = workdir / "metadata.json"
    metadata_path.write_text(json.dumps(doc, indent=1))
    broker = BrokerProcess(
        workdir=workdir,
        port=port,
        metadata_path=metadata_path,
        data_dir=workdir / "data",
        cluster_id=doc["cluster_id"],
    )
    broker.start()
    try:
        yield broker
    finally:
        with contextlib.suppress(Exception):
            broker.stop(timeout=5)
        broker.kill()
