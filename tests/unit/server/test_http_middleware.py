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
