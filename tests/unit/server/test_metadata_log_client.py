"""The broker's side of the metadata log: applying records, tenant views, authorization
through the tenant's ACLs, and ``ControlPlaneMetadataSource`` against a fake control plane
(register, deltas, long-poll, the on-disk cache)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json

import pytest
from aiohttp import web

from brokernodes.errors import (
    TopicAuthorizationFailedError,
    UnauthenticatedError,
    UnknownTopicOrPartitionError,
)
from brokernodes.server import auth
from brokernodes.server.metadata.client import ControlPlaneMetadataSource
from brokernodes.server.metadata.cluster import current_tenant
from brokernodes.server.metadata.image import apply_records, build_image

ORG_A, ORG_B = "org-a", "org-b"
SECRET_A, SECRET_B = "secret-a", "secret-b"


def rec(version, kind, key, value):
    return {"version": version, "kind": kind, "key": key, "value": value}


def topic(topic_id, org, name, leaders=(1,), configs=None):
    return {
        "topic_id": topic_id,
        "organisation": org,
        "name": name,
        "configs": configs or {},
        "partitions": [
            {"partition": i, "leader": b, "leader_epoch": 0, "replicas": [b], "isr": [b]}
            for i, b in enumerate(leaders)
        ],
    }


def key(key_id, org, secret, principal, role="member"):
    return {
        "key_id": key_id,
        "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(),
        "principal": principal,
        "organisation": org,
        "role": role,
    }


def acl(org, principal, name, op, permission, pattern="LITERAL", host="*"):
    return {
        "organisation": org,
        "principal": principal,
        "host": host,
        "resource_type": "TOPIC",
        "resource_name": name,
        "pattern_type": pattern,
        "operation": op,
        "permission": permission,
    }


RECORDS = [
    rec(1, "broker", "1", {"id": 1, "url": "http://127.0.0.1:9092/"}),
    rec(2, "topic", "t-a", topic("t-a", ORG_A, "orders", (1, 2), {"min.insync.replicas": "2"})),
    rec(3, "topic", "t-b", topic("t-b", ORG_B, "orders")),
    rec(4, "api_key", "slk_a", key("slk_a", ORG_A, SECRET_A, "User:app")),
    rec(5, "api_key", "slk_b", key("slk_b", ORG_B, SECRET_B, "User:app")),
    rec(6, "api_key", "slk_r", key("slk_r", ORG_A, "secret-r", "User:reader", "read-only")),
]


def image(records=RECORDS, state=None, reset=True):
    state = apply_records(state or {}, records, reset=reset)
    return build_image(state, cluster_id="c1", broker_id=1, version=records[-1]["version"])


def bearer(key_id, secret):
    return f"Bearer {key_id}.{secret}"


def run_in_context(fn):
    """Each request runs in its own task (aiohttp), so in its own context."""
    import contextvars

    return contextvars.copy_context().run(fn)


def test_global_image_keys_topics_by_id_and_views_by_name():
    img = image()
    assert set(img.topics) == {"t-a", "t-b"}
    assert img.brokers[1].url == "http://127.0.0.1:9092"
    assert [p.log_key for p in img.topics["t-a"].partitions] == ["t-a", "t-a"]
    assert img.hosted_partitions()[0].topic == "t-a"
    a = img.for_tenant(ORG_A)
    assert set(a.topics) == {"orders"} and a.topic("orders").topic_id == "t-a"
    assert a.partition("orders", 1).leader == 2 and a.partition("orders", 1).log_key == "t-a"
    assert a.topic("orders").configs["min.insync.replicas"] == "2"  # kept, not a log config
    assert img.for_tenant(ORG_B).topic("orders").topic_id == "t-b"
    with pytest.raises(UnknownTopicOrPartitionError):
        img.for_tenant("org-unknown").topic("orders")


def test_deltas_update_and_delete():
    img0 = image()
    state = apply_records({}, RECORDS, reset=True)
    state = apply_records(
        state,
        [rec(7, "topic", "t-b", None), rec(8, "api_key", "slk_a", None)],
        reset=False,
    )
    img = build_image(state, cluster_id="c1", broker_id=1, version=8)
    assert set(img.topics) == {"t-a"} and "slk_a" not in img.api_keys
    assert "slk_a" in img0.api_keys  # images are immutable


def test_authorize_resolves_the_tenant_and_applies_acls():
    img = image()

    def as_(key_id, secret, op, name):
        def call():
            auth.authorize(img, bearer(key_id, secret), op, "topic", name)
            return current_tenant.get()

        return run_in_context(call)

    assert as_("slk_a", SECRET_A, "WRITE", "orders") == ORG_A  # the member role allows
    assert as_("slk_b", SECRET_B, "READ", "orders") == ORG_B
    assert as_("slk_r", "secret-r", "READ", "orders") == ORG_A
    with pytest.raises(TopicAuthorizationFailedError):
        as_("slk_r", "secret-r", "WRITE", "orders")  # read-only
    with pytest.raises(UnauthenticatedError):
        as_("slk_a", SECRET_B, "READ", "orders")
    deny = rec(9, "acl", "x", acl(ORG_A, "User:app", "ord", "WRITE", "DENY", "PREFIXED"))
    img = image([*RECORDS, deny])
    with pytest.raises(TopicAuthorizationFailedError) as e:
        run_in_context(
            lambda: auth.authorize(img, bearer("slk_a", SECRET_A), "WRITE", "topic", "orders")
        )
    assert e.value.error_code == "TOPIC_AUTHORIZATION_FAILED"
    # the same principal name in tenant B is another principal: B's ACLs are B's
    run_in_context(
        lambda: auth.authorize(img, bearer("slk_b", SECRET_B), "WRITE", "topic", "orders")
    )
    # reading is still allowed (deny WRITE does not deny READ)
    run_in_context(
        lambda: auth.authorize(img, bearer("slk_a", SECRET_A), "READ", "topic", "orders")
    )
    # cluster describe (the tenant's own metadata) needs only a key; idempotent write is
    # allowed through WRITE on some topic
    run_in_context(lambda: auth.authorize(img, bearer("slk_r", "secret-r"), "DESCRIBE", "cluster"))
    run_in_context(
        lambda: auth.authorize(img, bearer("slk_a", SECRET_A), "IDEMPOTENT_WRITE", "cluster")
    )


def _from(host, fn):
    """Run ``fn`` as a request from client address ``host`` (None: unknown)."""

    def call():
        auth.current_client_host.set(auth.client_host(host))
        return fn()

    return run_in_context(call)


def test_host_specific_acls_match_the_client_address():
    allow = rec(
        9, "acl", "y", acl(ORG_A, "User:reader", "orders", "WRITE", "ALLOW", host="10.0.0.1")
    )
    deny = rec(10, "acl", "z", acl(ORG_A, "User:app", "orders", "READ", "DENY", host="10.0.0.2"))
    img = image([*RECORDS, allow, deny])
    write = lambda: auth.authorize(img, bearer("slk_r", "secret-r"), "WRITE", "topic", "orders")  # noqa: E731
    read = lambda: auth.authorize(img, bearer("slk_a", SECRET_A), "READ", "topic", "orders")  # noqa: E731
    # the read-only account may write only from 10.0.0.1
    assert _from("10.0.0.1", write).name == "User:reader"
    assert _from("::ffff:10.0.0.1", write).name == "User:reader"  # IPv4-mapped is the same host
    with pytest.raises(TopicAuthorizationFailedError):
        _from("127.0.0.1", write)
    # the app may read from anywhere but 10.0.0.2
    assert _from("127.0.0.1", read).name == "User:app"
    with pytest.raises(TopicAuthorizationFailedError):
        _from("10.0.0.2", read)


def test_unknown_client_address_fails_closed():
    allow = rec(
        9, "acl", "y", acl(ORG_A, "User:reader", "orders", "WRITE", "ALLOW", host="10.0.0.1")
    )
    deny = rec(10, "acl", "z", acl(ORG_A, "User:app", "orders", "READ", "DENY", host="10.0.0.2"))
    img = image([*RECORDS, allow, deny])
    assert auth.client_host("/run/sluice.sock") is None and auth.client_host(None) is None
    with pytest.raises(TopicAuthorizationFailedError):
        _from(
            None,
            lambda: auth.authorize(img, bearer("slk_r", "secret-r"), "WRITE", "topic", "orders"),
        )
    with pytest.raises(TopicAuthorizationFailedError):
        _from(
            None, lambda: auth.authorize(img, bearer("slk_a", SECRET_A), "READ", "topic", "orders")
        )


def test_static_keys_have_no_tenant_and_everything_is_allowed():
    from brokernodes.server.metadata.cluster import parse_metadata

    img = parse_metadata(
        {
            "cluster_id": "c",
            "broker_id": 1,
            "brokers": [{"id": 1, "url": "http://x"}],
            "topics": [{"name": "t", "partitions": 1}],
            "api_keys": [{"key_id": "k", "secret_sha256": hashlib.sha256(b"s").hexdigest()}],
        }
    )
    got = run_in_context(
        lambda: (auth.authorize(img, "Bearer k.s", "WRITE", "topic", "t"), current_tenant.get())
    )
    assert got[1] is None and img.partition("t", 0).log_key == "t"


# --- ControlPlaneMetadataSource against a fake control plane ------------------------------


class FakeControlPlane:
    def __init__(self):
        self.records = list(RECORDS)
        self.changed = asyncio.Event()
        self.registered: list[dict] = []
        self.heartbeats = 0
        self.auth_headers: set[str] = set()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/internal/v1/brokers/register", self.register)
        app.router.add_post("/internal/v1/brokers/heartbeat", self.heartbeat)
        app.router.add_get("/internal/v1/metadata", self.metadata)
        return app

    async def register(self, request):
        self.auth_headers.add(request.headers.get("Authorization", ""))
        self.registered.append(await request.json())
        return web.json_response({"cluster_id": "c1", "version": 0, "heartbeat_interval_ms": 50})

    async def heartbeat(self, request):
        self.heartbeats += 1
        return web.json_response({"live": True})

    async def metadata(self, request):
        since = int(request.query["since"])
        wait = int(request.query["wait_ms"]) / 1000
        head = self.records[-1]["version"]
        if since == 0:
            return web.json_response(
                {"cluster_id": "c1", "version": head, "reset": True, "records": self.records}
            )
        if head == since and wait:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), wait)
        new = [r for r in self.records if r["version"] > since]
        version = new[-1]["version"] if new else since
        return web.json_response(
            {"cluster_id": "c1", "version": version, "reset": False, "records": new}
        )

    def append(self, kind, key_, value):
        self.records.append(rec(self.records[-1]["version"] + 1, kind, key_, value))
        self.changed.set()


def test_client_registers_pulls_deltas_and_restarts_from_its_cache(tmp_path):
    async def main():
        fake = FakeControlPlane()
        runner = web.AppRunner(fake.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        src = ControlPlaneMetadataSource(
            url,
            broker_id=1,
            advertised_url="http://127.0.0.1:9092",
            secret="cs",
            data_dir=str(tmp_path),
            wait_ms=2000,
        )
        seen = []
        src.add_listener(lambda img: seen.append(img.version))
        await src.start()
        try:
            assert fake.registered == [
                {"broker_id": 1, "url": "http://127.0.0.1:9092", "clean_shutdown": True}
            ]
            assert fake.auth_headers == {"Cluster cs"}
            assert src.version == 6 and set(src.current().topics) == {"t-a", "t-b"}
            fake.append("api_key", "slk_a", None)  # revoked
            for _ in range(100):  # listeners run after the cache is written
                if src.version == 7 and seen and seen[-1] == 7:
                    break
                await asyncio.sleep(0.02)
            assert src.version == 7 and "slk_a" not in src.current().api_keys
            assert seen[-1] == 7
            await asyncio.sleep(0.2)
            assert fake.heartbeats >= 1
        finally:
            await src.close()
            await runner.cleanup()
        cache = json.loads((tmp_path / "metadata-cache.json").read_text())
        assert cache["version"] == 7
        # the control plane is gone: a restart serves the cached image
        again = ControlPlaneMetadataSource(
            url,
            broker_id=1,
            advertised_url="http://127.0.0.1:9092",
            secret="cs",
            data_dir=str(tmp_path),
            request_timeout_s=0.5,
        )
        await asyncio.wait_for(again.start(), 5)
        try:
            assert again.version == 7 and "slk_a" not in again.current().api_keys
            assert again.current().for_tenant(ORG_A).topic("orders").topic_id == "t-a"
        finally:
            await again.close()

    asyncio.run(asyncio.wait_for(main(), 30))
