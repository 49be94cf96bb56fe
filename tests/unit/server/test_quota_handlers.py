"""Quotas through a real broker app (aiohttp test server) with control-plane-style metadata:
WebSocket produce acks and binary fetch answers are delayed by the throttle time and report
it; static-file keys are never throttled."""

from __future__ import annotations

import asyncio
import hashlib
import time

from aiohttp.test_utils import TestClient, TestServer

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import ClusterMetadata, MetadataSource, current_tenant
from brokernodes.server.metadata.image import build_image

ORG = "3f1c0b52-0000-4000-8000-000000000001"


class TenantMetadata(MetadataSource):
    """A fixed control-plane image, scoped to the request's tenant as the real client is."""

    def __init__(self, image: ClusterMetadata) -> None:
        self._image = image

    def current(self) -> ClusterMetadata:
        tenant = current_tenant.get()
        return self._image if tenant is None else self._image.for_tenant(tenant)

    def global_image(self) -> ClusterMetadata:
        return self._image


def _broker(tmp_path, limits: dict) -> Broker:
    state = {
        ("broker", "1"): {"id": 1, "url": "http://127.0.0.1:1"},
        ("topic", "tid"): {
            "topic_id": "tid",
            "organisation": ORG,
            "name": "t",
            "configs": {},
            "partitions": [
                {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1]}
            ],
        },
        ("api_key", "slk_k1"): {
            "key_id": "k1",
            "secret_sha256": hashlib.sha256(b"s1").hexdigest(),
            "principal": "User:app",
            "organisation": ORG,
            "role": "member",
        },
        ("quota", "q1"): {"organisation": ORG, "principal": None, "limits": limits},
    }
    image = build_image(state, cluster_id="c", broker_id=1, version=1)
    config = BrokerConfig("", str(tmp_path / "data"), 0, fsync=False)
    return Broker(config, TenantMetadata(image))


AUTH = {"Authorization": "Bearer k1.s1"}


def test_ws_produce_ack_and_binary_fetch_are_delayed_by_the_throttle(tmp_path):
    broker = _broker(tmp_path, {"produce_bytes_per_sec": 100, "fetch_bytes_per_sec": 100})
    app = build_app(broker)

    async def main():
        await broker.start()
        try:
            async with TestClient(TestServer(app)) as client:
                ws = await client.ws_connect("/sluice/v1/ws/produce", headers=AUTH)
                # 1,050 bytes against 100 B/s over the 10 s minimum window: 500 ms
                value = {"type": "STRING", "data": "x" * 1050}
                start = time.monotonic()
                await ws.send_json({"id": 1, "topic": "t", "records": [{"value": value}]})
                answer = await ws.receive_json(timeout=5)
                elapsed = time.monotonic() - start
                assert answer["offsets"][0]["offset"] == 0, answer
                assert answer["throttle_time_ms"] == 500, answer
                assert "_not_before" not in answer
                assert elapsed >= 0.45, elapsed
                await ws.close()

                start = time.monotonic()
                resp = await client.get(
                    "/sluice/v1/topics/t/partitions/0/batches?offset=0", headers=AUTH
                )
                body = await resp.read()
                elapsed = time.monotonic() - start
                throttle = int(resp.headers["Sluice-Throttle-Time-Ms"])
                assert resp.status == 200 and len(body) > 1000
                # a fresh sensor: the bytes over a 10 s window, (rate - quota) / quota * 10 s
                assert abs(throttle - (len(body) / 10 - 100) * 100) <= 1, throttle
                assert elapsed >= throttle / 1000 - 0.01

                metrics = (await (await client.get("/metrics")).read()).decode()
                assert f'sluice_throttle_seconds_total{{quota="produce",tenant="{ORG}"}} 0.5' in (
                    metrics
                )
                assert f'sluice_throttle_seconds_total{{quota="fetch",tenant="{ORG}"}}' in metrics
        finally:
            await broker.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_storage_quota_refuses_binary_produce_with_403(tmp_path):
    broker = _broker(tmp_path, {"storage_bytes": 100})
    app = build_app(broker)
    batch = encode_batch([Record(0, None, b"v" * 200, ())])
    url = "/sluice/v1/topics/t/partitions/0/batches"

    async def main():
        await broker.start()
        try:
            async with TestClient(TestServer(app)) as client:
                first = await client.post(url, data=bytes(batch), headers=AUTH)
                assert first.status == 200, await first.text()
                assert (await first.json())["throttle_time_ms"] == 0
                assert first.headers["Sluice-Throttle-Time-Ms"] == "0"
                refused = await client.post(url, data=bytes(batch), headers=AUTH)
                body = await refused.json()
                assert refused.status == 403, body
                assert body["error_code"] == "QUOTA_EXCEEDED"
                assert body["limit"] == 100 and body["used"] > 100
                assert "storage limit of 100 bytes" in body["message"]
                fetched = await client.get(f"{url}?offset=0", headers=AUTH)
                assert fetched.headers["Sluice-High-Watermark"] == "1"  # nothing appended
        finally:
            await broker.close()

    asyncio.run(asyncio.wait_for(main(), 30))
