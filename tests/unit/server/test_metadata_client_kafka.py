"""``ControlPlaneMetadataSource`` and the Kafka listener: registration names the broker's
Kafka address (and drops it for a control plane that refuses the field), and tenant calls
(the Kafka admin APIs) carry the caller's own credentials, never the cluster secret."""

from __future__ import annotations

import asyncio

from aiohttp import web

from brokernodes.server.metadata.client import ControlPlaneMetadataSource


class FakeControlPlane:
    def __init__(self, *, knows_kafka: bool = True) -> None:
        self.knows_kafka = knows_kafka
        self.registered: list[dict] = []
        self.tenant_calls: list[tuple[str, str, str, object]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/internal/v1/brokers/register", self.register)
        app.router.add_post("/internal/v1/brokers/heartbeat", self.heartbeat)
        app.router.add_get("/internal/v1/metadata", self.metadata)
        app.router.add_route("*", "/api/v1/{tail:.*}", self.tenant)
        return app

    async def register(self, request):
        body = await request.json()
        self.registered.append(body)
        if "kafka" in body and not self.knows_kafka:  # an older, strict control plane
            return web.json_response(
                {"error_code": "INVALID_REQUEST", "fields": {"kafka": ["unknown field"]}},
                status=400,
            )
        return web.json_response({"cluster_id": "c1", "version": 0, "broker_epoch": 1})

    async def heartbeat(self, request):
        return web.json_response({"live": True})

    async def metadata(self, request):
        return web.json_response({"cluster_id": "c1", "version": 1, "reset": True, "records": []})

    async def tenant(self, request):
        body = await request.json() if request.can_read_body else None
        auth = request.headers.get("Authorization", "")
        self.tenant_calls.append((request.method, request.path, auth, body))
        return web.json_response(
            {"error_code": "NOT_FOUND", "message": "no such topic"}, status=404
        )


async def started(fake: FakeControlPlane, tmp_path, **kw):
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    src = ControlPlaneMetadataSource(
        f"http://127.0.0.1:{port}",
        broker_id=1,
        advertised_url="http://127.0.0.1:9092",
        secret="cs",
        data_dir=str(tmp_path),
        **kw,
    )
    await src.start()
    return src, runner


def test_registration_names_the_kafka_listener_and_tenant_calls_use_the_callers_key(tmp_path):
    async def main():
        fake = FakeControlPlane()
        src, runner = await started(fake, tmp_path, kafka_advertised="127.0.0.1:29092")
        try:
            assert fake.registered[0]["kafka"] == "127.0.0.1:29092"
            status, doc, _ = await src.tenant_request(
                "PATCH",
                "topics/orders",
                authorization="Bearer slk_k.secret",
                json_body={"configs": {}},
            )
            assert (status, doc["error_code"]) == (404, "NOT_FOUND")
            assert fake.tenant_calls == [
                ("PATCH", "/api/v1/topics/orders", "Bearer slk_k.secret", {"configs": {}})
            ]
        finally:
            await src.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_a_control_plane_that_stores_no_listener_registers_without_it(tmp_path):
    async def main():
        fake = FakeControlPlane(knows_kafka=False)
        src, runner = await started(fake, tmp_path, kafka_advertised="127.0.0.1:29092")
        try:
            assert [("kafka" in r) for r in fake.registered] == [True, False]
            assert src.registered
        finally:
            await src.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_without_a_listener_registration_names_none(tmp_path):
    async def main():
        fake = FakeControlPlane()
        src, runner = await started(fake, tmp_path)
        try:
            assert "kafka" not in fake.registered[0]
        finally:
            await src.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(main(), 20))
