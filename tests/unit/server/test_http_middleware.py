"""The middleware maps every failure to a JSON error body (no broker process needed)."""

import asyncio
import json
import logging

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from brokernodes.errors import OffsetOutOfRangeError
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import StaticMetadataSource


def test_unexpected_errors_are_500_with_a_logged_request_id(tmp_path, caplog):
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"cluster_id": "c", "broker_id": 1, "brokers": []}))
    broker = Broker(BrokerConfig(str(meta), str(tmp_path), 0), StaticMetadataSource(meta))
    app = build_app(broker)

    async def boom(request):
        raise RuntimeError("kaboom")

    async def known(request):
        raise OffsetOutOfRangeError("offset 9 is past the end")

    app.router.add_get("/boom", boom, name="boom")
    app.router.add_get("/known", known, name="known")

    async def main():
        async with TestClient(TestServer(app)) as client:
            r = await client.get("/boom", headers={"Authorization": "Bearer k.topsecret"})
            body = await r.json()
            assert r.status == 500 and body["error_code"] == "UNKNOWN_SERVER_ERROR"
            assert body["request_id"] in body["message"]
            r = await client.get("/known")
            assert r.status == 416 and (await r.json())["error_code"] == "OFFSET_OUT_OF_RANGE"
            r = await client.get("/readyz")
            assert r.status == 503 and (await r.json()) == {"status": "starting"}
            r = await client.post("/healthz")
            assert r.status == 405 and (await r.json())["error_code"] == "METHOD_NOT_ALLOWED"
            return body["request_id"]

    with caplog.at_level(logging.ERROR):
        request_id = asyncio.run(main())
    assert request_id in caplog.text and "kaboom" in caplog.text
    assert "topsecret" not in caplog.text
    assert isinstance(app, web.Application)


def _histogram():
    from prometheus_client import CollectorRegistry, Histogram

    from brokernodes.server.metrics import LATENCY_BUCKETS

    registry = CollectorRegistry()
    h = Histogram("lat", "latency", ["endpoint"], buckets=LATENCY_BUCKETS, registry=registry)
    return registry, h


def _samples(registry) -> dict:
    """Every bucket and count as is, sums to 9 digits (added in another order), no
    creation times."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): round(s.value, 9)
        for metric in registry.collect()
        for s in metric.samples
        if not s.name.endswith("_created")
    }


def test_batched_latencies_read_as_the_histogram_observing_each_one():
    from brokernodes.server.app import LATENCY_BATCH, LatencyBatch
    from brokernodes.server.metrics import LATENCY_BUCKETS

    direct_registry, direct = _histogram()
    batched_registry, batched = _histogram()
    batch = LatencyBatch(batched)
    values = [0.0, 1e-6, *LATENCY_BUCKETS, *(b * 1.001 for b in LATENCY_BUCKETS), 1e6]
    for i, v in enumerate(values * 3):
        endpoint = ("produce_binary", "fetch_binary")[i % 2]
        direct.labels(endpoint).observe(v)
        batch.observe(endpoint, v)
    assert _samples(batched_registry) != _samples(direct_registry)  # pending
    batch.flush()
    assert _samples(batched_registry) == _samples(direct_registry)
    for _ in range(LATENCY_BATCH):  # a full batch goes to the histogram without a flush
        batch.observe("metadata", 0.002)
    full = _samples(batched_registry)
    assert full[("lat_count", (("endpoint", "metadata"),))] == LATENCY_BATCH
    assert full[("lat_sum", (("endpoint", "metadata"),))] == round(0.002 * LATENCY_BATCH, 9)
    batch.flush()  # nothing pending: nothing changes
    assert _samples(batched_registry) == full
