"""Per-tenant caps on what a broker holds for clients, on a real control plane and broker:
tenant A fills its cap of REST consumer instances and of WebSocket streams (produce streams
and a live tail); A's next one is refused with 429 and a code naming the cap, while tenant B
still creates instances, streams and cursors. A quota set by platform staff raises A's cap
on the broker. (Before, 1,000 instances per broker were shared by every tenant and streams
had no cap at all.)"""

from __future__ import annotations

import asyncio
import contextlib
import json

import aiohttp
import pytest

from tests.integration.control_plane.conftest import http, start_control_plane, wait_for
from tests.integration.control_plane.test_quotas_e2e import StaffSession

INSTANCES_PER_TENANT = 3
STREAMS_PER_TENANT = 2
TIMEOUT_S = 10.0
ENV = {
    "SLUICE_MAX_CONSUMER_INSTANCES_PER_TENANT": str(INSTANCES_PER_TENANT),
    "SLUICE_MAX_CONSUMER_INSTANCES": "50",
    "SLUICE_MAX_STREAMS_PER_TENANT": str(STREAMS_PER_TENANT),
    "SLUICE_MAX_STREAMS": "50",
}


@pytest.fixture
def setup(tmp_path):
    with start_control_plane(tmp_path, ENV) as cp:
        a, b = cp.tenant("alpha"), cp.tenant("bravo")
        broker = cp.start_broker(1)
        for t in (a, b):
            s, body = cp.api(
                "POST", "topics/", {"name": "orders", "partitions": 1}, key=t["api_key"]
            )
            assert s == 201, body

            def known(key=t["api_key"]):
                s, meta = http("GET", f"{broker.url}/sluice/v1/metadata", key=key)
                return s == 200 and [x["name"] for x in meta["topics"]] == ["orders"]

            wait_for("the broker to learn the topic", known)
        yield cp, broker, a["api_key"], b["api_key"], a


def create_instance(broker, key: str, name: str) -> tuple[int, dict]:
    return http("POST", f"{broker.url}/consumers/g", {"name": name}, key=key)


def test_consumer_instances_are_capped_per_tenant(setup):
    cp, broker, ka, kb, alpha = setup
    for i in range(INSTANCES_PER_TENANT):
        s, body = create_instance(broker, ka, f"a{i}")
        assert s == 200, body
    s, err = create_instance(broker, ka, "one-too-many")
    assert s == 429, err
    assert (err["error_code"], err["sluice_code"]) == (42901, "TOO_MANY_CONSUMER_INSTANCES")
    assert (err["cap"], err["scope"], err["used"], err["limit"]) == (
        "consumer_instances",
        "tenant",
        INSTANCES_PER_TENANT,
        INSTANCES_PER_TENANT,
    )
    # the other tenant is unaffected
    for i in range(INSTANCES_PER_TENANT):
        s, body = create_instance(broker, kb, f"b{i}")
        assert s == 200, body
    # deleting one makes room again
    s, _ = http("DELETE", f"{broker.url}/consumers/g/instances/a0", key=ka)
    assert s == 204
    assert create_instance(broker, ka, "a0-again")[0] == 200

    # a quota raises alpha's cap (platform staff, through the metadata log)
    staff = StaffSession(cp)
    staff.set_quota(alpha["organisation"], max_consumer_instances=INSTANCES_PER_TENANT + 2)
    attempts = iter(range(1000))

    def raised():
        s, _ = create_instance(broker, ka, f"extra-{next(attempts)}")
        return s == 200

    wait_for("alpha's larger quota on the broker", raised)
    assert create_instance(broker, ka, "last")[0] == 200
    s, err = create_instance(broker, ka, "over-the-quota")
    assert s == 429 and err["limit"] == INSTANCES_PER_TENANT + 2, err


async def _streams(broker, ka: str, kb: str) -> None:
    ws_url = broker.url.replace("http://", "ws://")
    produce = f"{ws_url}/sluice/v1/ws/produce"
    tail = f"{ws_url}/sluice/v1/ws/consume?topic=orders&partition=0&from=latest"
    timeout = aiohttp.ClientWSTimeout(ws_receive=TIMEOUT_S, ws_close=TIMEOUT_S)
    async with contextlib.AsyncExitStack() as stack:
        session = await stack.enter_async_context(aiohttp.ClientSession())

        def open_ws(url, key=None):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return session.ws_connect(url, headers=headers, timeout=timeout)

        # alpha: a produce stream and a live tail fill its cap of 2
        await stack.enter_async_context(open_ws(produce, ka))
        await stack.enter_async_context(open_ws(tail, ka))
        # a third, key in the header: refused before the upgrade
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with open_ws(produce, ka):
                pass
        assert refused.value.status == 429
        # a third, key as the first frame: the error, then close 4429
        async with open_ws(produce) as ws:
            await ws.send_str(json.dumps({"auth": ka}))
            msg = await ws.receive(timeout=TIMEOUT_S)
            err = json.loads(msg.data)
            assert err["error_code"] == "TOO_MANY_STREAMS", err
            assert (err["cap"], err["scope"]) == ("streams", "tenant")
            msg = await ws.receive(timeout=TIMEOUT_S)
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert ws.close_code == 4429
        # bravo opens its own streams meanwhile, and they work
        bws = await stack.enter_async_context(open_ws(produce, kb))
        await stack.enter_async_context(open_ws(tail, kb))
        request = {
            "id": "b1",
            "topic": "orders",
            "records": [{"value": {"type": "STRING", "data": "x"}}],
        }
        await bws.send_str(json.dumps(request))
        ack = json.loads((await bws.receive(timeout=TIMEOUT_S)).data)
        assert ack["id"] == "b1" and "offsets" in ack, ack


def test_streams_are_capped_per_tenant_and_cursors_need_no_cap(setup):
    _, broker, ka, kb, _ = setup
    asyncio.run(asyncio.wait_for(_streams(broker, ka, kb), 60))
    # alpha's streams closed: room again
    asyncio.run(asyncio.wait_for(_streams(broker, ka, kb), 60))
    # cursors hold nothing on the broker: both tenants read with them whatever they hold
    for key in (ka, kb):
        s, c = http("GET", f"{broker.url}/sluice/v1/topics/orders/cursor?from=earliest", key=key)
        assert s == 200 and c["cursor"], c
