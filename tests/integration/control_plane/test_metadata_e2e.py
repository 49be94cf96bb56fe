"""The control plane and a real broker, end to end: topics created through the API reach the
broker through the metadata log; tenants' keys, names, ACLs and revocations hold on the
broker's data plane; a broker restarts from its metadata cache without the control plane."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from .conftest import SECRET, ControlPlane, http, wait_for


def produce(broker, topic: str, value: str, key: str, partition: int = 0):
    return http(
        "POST",
        f"{broker.url}/v3/clusters/sluice-local/topics/{topic}/records",
        {"partition_id": partition, "value": {"type": "STRING", "data": value}},
        key=key,
    )


def consume(broker, topic: str, key: str, partition: int = 0, offset: int = 0):
    return http(
        "GET",
        f"{broker.url}/sluice/v1/topics/{topic}/partitions/{partition}/records"
        f"?offset={offset}&format=text",
        key=key,
    )


def topic_id_on(broker, topic: str, key: str) -> str | None:
    status, meta = http("GET", f"{broker.url}/sluice/v1/metadata", key=key)
    assert status == 200, meta
    ids = [t["topic_id"] for t in meta["topics"] if t["name"] == topic]
    return ids[0] if ids else None


def test_topics_keys_acls_and_revocation_reach_the_broker(control_plane: ControlPlane):
    cp = control_plane
    a = cp.tenant("alpha")
    b = cp.tenant("bravo")
    ka, kb = a["api_key"], b["api_key"]
    broker = cp.start_broker(1)

    status, topic = cp.api(
        "POST", "topics/", {"name": "orders", "partitions": 2, "replication_factor": 1}, key=ka
    )
    assert status == 201, topic
    wait_for("the broker to learn the topic", lambda: topic_id_on(broker, "orders", ka))
    assert topic_id_on(broker, "orders", ka) == topic["topic_id"]
    # the partition loads just after the metadata arrives ("not loaded yet; retry shortly")
    status, body = wait_for(
        "the partition to load",
        lambda: (r := produce(broker, "orders", "a-1", ka))[0] != 404 and r,
    )
    assert status == 200 and body["offset"] == 0, body
    assert (broker.data_dir / f"{topic['topic_id']}-0").is_dir()
    status, body = consume(broker, "orders", ka)
    assert status == 200 and [r["value"] for r in body["records"]] == ["a-1"]

    # another tenant cannot name it: 404, and its metadata does not list it
    for status, body in (produce(broker, "orders", "b-x", kb), consume(broker, "orders", kb)):
        code = body.get("sluice_code", body["error_code"])  # v3 produce: beside 40403
        assert status == 404 and code == "UNKNOWN_TOPIC_OR_PARTITION", body
    assert topic_id_on(broker, "orders", kb) is None
    # ... and its own "orders" is another topic
    status, topic_b = cp.api(
        "POST", "topics/", {"name": "orders", "partitions": 1, "replication_factor": 1}, key=kb
    )
    assert status == 201 and topic_b["topic_id"] != topic["topic_id"]
    wait_for("bravo's topic", lambda: topic_id_on(broker, "orders", kb))
    status, body = wait_for(
        "bravo's partition to load",
        lambda: (r := produce(broker, "orders", "b-1", kb))[0] != 404 and r,
    )
    assert body["offset"] == 0, body
    assert [r["value"] for r in consume(broker, "orders", kb)[1]["records"]] == ["b-1"]
    assert [r["value"] for r in consume(broker, "orders", ka)[1]["records"]] == ["a-1"]

    # ACL DENYs on WRITE, host-specific: the one for another host never applies; the one for
    # this client's address (loopback) refuses produce with 403, fetch still works
    def deny_write(host: str) -> dict:
        status, binding = cp.api(
            "POST",
            "acls/",
            {
                "principal": "User:alpha-app",
                "host": host,
                "resource_type": "TOPIC",
                "resource_name": "ord",
                "pattern_type": "PREFIXED",
                "operation": "WRITE",
                "permission": "DENY",
            },
            key=ka,
        )
        assert status == 201, binding
        return binding

    deny_write("10.0.0.9")
    binding = deny_write("127.0.0.1")
    status, body = wait_for(
        "the DENY to apply",
        lambda: (r := produce(broker, "orders", "a-2", ka))[0] == 403 and r,
    )
    assert body["sluice_code"] == "TOPIC_AUTHORIZATION_FAILED", body
    assert consume(broker, "orders", ka)[0] == 200
    assert produce(broker, "orders", "b-2", kb)[0] == 200  # bravo's ACLs are bravo's
    assert cp.api("DELETE", f"acls/{binding['id']}", key=ka)[0] == 204
    wait_for("the DENY to go", lambda: produce(broker, "orders", "a-3", ka)[0] == 200)

    # delete and re-create the name: a new topic id, the old data is gone
    assert cp.api("DELETE", "topics/orders", key=ka)[0] == 204
    wait_for("the deletion", lambda: topic_id_on(broker, "orders", ka) is None)
    wait_for(
        "the old data removed", lambda: not (broker.data_dir / f"{topic['topic_id']}-0").exists()
    )
    status, again = cp.api(
        "POST", "topics/", {"name": "orders", "partitions": 1, "replication_factor": 1}, key=ka
    )
    assert status == 201 and again["topic_id"] != topic["topic_id"]
    wait_for("the new topic", lambda: topic_id_on(broker, "orders", ka) == again["topic_id"])
    status, body = wait_for(
        "the new partition to load",
        lambda: (r := consume(broker, "orders", ka))[0] != 404 and r,
    )
    assert status == 200 and body["records"] == [] and body["high_watermark"] == 0

    # revoking the key: the broker refuses it on the next delta
    key_id = ka.split(".", 1)[0].removeprefix("slk_")
    assert cp.api("DELETE", f"api-keys/{key_id}", key=ka)[0] == 204
    revoked_at = time.monotonic()
    status, body = wait_for(
        "the revocation", lambda: (r := consume(broker, "orders", ka))[0] == 401 and r, timeout=5
    )
    assert body["error_code"] == "UNAUTHENTICATED"
    assert time.monotonic() - revoked_at < 2  # long-poll: well under a second in practice
    assert consume(broker, "orders", kb)[0] == 200


def test_a_broker_restarts_from_its_cache_without_the_control_plane(
    control_plane: ControlPlane,
):
    cp = control_plane
    a = cp.tenant("alpha")
    key = a["api_key"]
    broker = cp.start_broker(1)
    assert cp.api("POST", "topics/", {"name": "logs", "replication_factor": 1}, key=key)[0] == 201
    wait_for("the topic", lambda: topic_id_on(broker, "logs", key))
    assert produce(broker, "logs", "before", key)[0] == 200
    assert cp.server is not None
    cp.server.stop()
    broker.stop()
    broker.start()
    broker.wait_ready()
    assert produce(broker, "logs", "after", key)[0] == 200
    body = consume(broker, "logs", key)[1]
    assert [r["value"] for r in body["records"]] == ["before", "after"]


def test_websockets_are_tenant_scoped_and_close_on_revocation(control_plane: ControlPlane):
    import asyncio
    import json

    import aiohttp

    cp = control_plane
    a, b = cp.tenant("alpha"), cp.tenant("bravo")
    broker = cp.start_broker(1)
    body = {"name": "events", "partitions": 1, "replication_factor": 1}
    assert cp.api("POST", "topics/", body, key=a["api_key"])[0] == 201
    wait_for("the topic", lambda: topic_id_on(broker, "events", a["api_key"]))
    ws_url = broker.url.replace("http://", "ws://") + "/sluice/v1/ws"
    request = {
        "id": "r1",
        "topic": "events",
        "records": [{"value": {"type": "STRING", "data": "w"}}],
    }

    async def produce_ws(key: str) -> dict:
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(f"{ws_url}/produce", headers={"Authorization": f"Bearer {key}"}) as ws,
        ):
            await ws.send_str(json.dumps(request))
            return json.loads((await ws.receive(timeout=10)).data)

    async def consume_until_revoked() -> tuple[list, int | None]:
        key = a["api_key"]
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(
                f"{ws_url}/consume?topic=events&partition=0&from=earliest&format=json",
                headers={"Authorization": f"Bearer {key}"},
            ) as ws,
        ):
            await ws.send_str(json.dumps({"credit": 1 << 20}))
            first = json.loads((await ws.receive(timeout=10)).data)
            key_id = key.split(".", 1)[0].removeprefix("slk_")
            status = await asyncio.to_thread(cp.api, "DELETE", f"api-keys/{key_id}", key=key)
            assert status[0] == 204
            while True:  # the stream ends (an error message, then the close) within seconds
                msg = await ws.receive(timeout=5)
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                    return first["records"], ws.close_code

    answer = asyncio.run(asyncio.wait_for(produce_ws(a["api_key"]), 20))
    assert answer["offsets"][0]["offset"] == 0, answer
    other = asyncio.run(asyncio.wait_for(produce_ws(b["api_key"]), 20))
    assert other["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION", other
    records, code = asyncio.run(asyncio.wait_for(consume_until_revoked(), 30))
    assert [r["value"] for r in records] == ["w"]
    assert code is not None and code >= 1000


def test_metrics_are_for_operators_only(control_plane: ControlPlane):
    """/metrics names every tenant's topics: a tenant's key is refused, the cluster secret
    (the operators' credential) is let in."""
    cp = control_plane
    key = cp.tenant("alpha")["api_key"]
    broker = cp.start_broker(1)
    url = f"{broker.url}/metrics"
    assert urllib.request.urlopen(f"{broker.url}/healthz", timeout=5).status == 200
    for header in (None, f"Bearer {key}", "Cluster wrong-secret"):
        request = urllib.request.Request(url)
        if header:
            request.add_header("Authorization", header)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401
        assert json.loads(refused.value.read())["error_code"] == "UNAUTHENTICATED"
    # byte counters are per tenant and topic: two tenants' topics of one name stay apart
    bravo = cp.tenant("bravo")
    for tenant_key in (key, bravo["api_key"]):
        status, topic = cp.api(
            "POST",
            "topics/",
            {"name": "orders", "partitions": 1, "replication_factor": 1},
            key=tenant_key,
        )
        assert status == 201, topic
        wait_for("the topic", lambda k=tenant_key: topic_id_on(broker, "orders", k))
        wait_for(
            "a produce",
            lambda k=tenant_key: produce(broker, "orders", "v" * 10, k)[0] == 200,
        )
    request = urllib.request.Request(url, headers={"Authorization": f"Cluster {SECRET}"})
    with urllib.request.urlopen(request, timeout=5) as r:
        assert r.status == 200
        text = r.read().decode()
    lines = [
        line
        for line in text.splitlines()
        if line.startswith("sluice_bytes_in_total{") and 'topic="orders"' in line
    ]
    tenants = {line.split('tenant="', 1)[1].split('"', 1)[0] for line in lines}
    assert len(lines) == 2 and len(tenants) == 2 and "" not in tenants, lines
