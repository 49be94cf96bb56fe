"""Hostile requests against a real broker: every route (taken from the broker's own router)
answers bad input with a 4xx and a stable error code, never a 5xx; requests without Host are
refused; no answer names the server's versions; malformed requests log one quiet line, not a
traceback per request."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
import time

import aiohttp
import pytest

from brokernodes.broker_main import ROUTES
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import StaticMetadataSource
from tests.integration.broker.util import raw_request, status_of
from tests.integration.conftest import DEFAULT_TOPICS

AUTH = "Bearer sk_test.s3cret-test-value"
TOPICS = {
    **DEFAULT_TOPICS,
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
    "__transaction_state": (4, {"cleanup.policy": "compact"}),
}
MAX_REQUEST_BYTES = 1 << 20
PAST_INT64 = str(2**64 + 1)
INT_PARAMS = (
    "offset",
    "max_bytes",
    "max_wait_ms",
    "min_bytes",
    "max_records",
    "timeout",
    "from",
    "timestamp",
    "partition",
    "replica_id",
    "current_leader_epoch",
    "broker_epoch",
    "leader_epoch",
)
# (route name, parameter): the parameter is read there, so past int64 it is INVALID_REQUEST
READ_PARAMS = (
    ("fetch_binary", "offset"),
    ("fetch_binary", "max_bytes"),
    ("fetch_binary", "max_wait_ms"),
    ("fetch_json", "offset"),
    ("fetch_json", "max_records"),
    ("list_offsets", "timestamp"),
    ("ws_consume", "offset"),
    ("ws_consume", "timestamp"),
    ("ws_consume", "partition"),
    ("ws_consume", "max_bytes"),
)
PATH_VALUES = {
    "topic": "events",
    "partition": "0",
    "group": "g1",
    "instance": "i1",
    "cursor": "c1",
    "tenant": "t1",
    "producer_id": "1",
    "transactional_id": "t1",
    "tail": "topics",  # the control-plane pass-through's v3 paths
}


def _routes(tmp_path, cluster_id: str) -> list[tuple[str, str, str]]:
    """(name, method, path) of every route the broker serves, from its own router (with the
    REST proxy's routes, as the process entry point installs them)."""
    meta = tmp_path / "routes-metadata.json"
    meta.write_text(json.dumps({"cluster_id": cluster_id, "broker_id": 1, "brokers": []}))
    broker = Broker(BrokerConfig(str(meta), str(tmp_path), 0), StaticMetadataSource(meta))
    app = build_app(broker, ROUTES)
    routes = []
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        info = route.resource.get_info()  # type: ignore[union-attr]
        template = info.get("path") or info["formatter"]
        path = template.format(cluster=cluster_id, **PATH_VALUES)
        routes.append((route.name or "", route.method, path))
    assert len(routes) > 30, routes
    return routes


def _send(port: int, method: str, path: str, body: bytes = b"", length: int | None = None):
    """(status, error code or None); ``length`` announces a body that is not sent."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path)
        conn.putheader("Authorization", AUTH)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body) if length is None else length))
        conn.endheaders(body if length is None else None)
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        answer = json.loads(data)
        # Sluice's code: beside Confluent's integer on Confluent's routes
        code = answer.get("sluice_code", answer.get("error_code"))
    except (ValueError, AttributeError):
        code = None
    return resp.status, code


def test_bad_input_on_every_route_is_a_4xx_with_a_stable_code(broker_factory, tmp_path):
    b = broker_factory(TOPICS, extra_args=[f"--max-request-bytes={MAX_REQUEST_BYTES}"])
    deep = b"[" * 5000 + b"]" * 5000
    nested = b"[" * 300 + b"]" * 300  # parses (orjson allows 1024 levels), too deep to write
    bodies = {
        "deep": deep,
        "deep value": b'{"value": {"type": "JSON", "data": ' + nested + b"}}",
        "deep entries": b'{"entries": [{"value": {"type": "JSON", "data": ' + nested + b"}}]}",
        "big ints": json.dumps(
            {k: 2**64 + 1 for k in ("offset", "partition_id", "member_epoch", "timestamp")}
        ).encode(),
    }
    failures = []
    for name, method, path in _routes(tmp_path, b.cluster_id):
        # a body announced over the limit: 413 on every route, read or not
        status, code = _send(b.port, method, path, length=MAX_REQUEST_BYTES + 1)
        if (status, code) != (413, "REQUEST_TOO_LARGE"):
            failures.append((name, "oversize", status, code))
        for what, body in bodies.items():
            status, code = _send(b.port, method, path, body)
            if status >= 500 or (status >= 400 and code is None):
                failures.append((name, what, status, code))
        for param in INT_PARAMS:
            sep = "&" if "?" in path else "?"
            query = f"{sep}{param}={PAST_INT64}"
            if name == "ws_consume":
                query += "&topic=events"
            status, code = _send(b.port, method, path + query, b"{}" if method == "POST" else b"")
            if (
                status >= 500
                or (status >= 400 and code is None)
                or ((name, param) in READ_PARAMS and (status, code) != (400, "INVALID_REQUEST"))
            ):
                failures.append((name, param, status, code))
    # a partition number past int32 in the path
    status, code = _send(b.port, "GET", f"/sluice/v1/topics/events/partitions/{PAST_INT64}/offsets")
    if (status, code) != (400, "INVALID_REQUEST"):
        failures.append(("list_offsets", "path partition", status, code))
    assert not failures, failures
    assert "Traceback" not in b.output()


def _head_of(raw: bytes) -> dict[str, str]:
    lines = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


@pytest.mark.parametrize("front", ["fast", "aiohttp"])
def test_no_host_is_400_and_no_server_version_is_announced(broker_factory, front):
    b = broker_factory(extra_args=[f"--http-front={front}"])
    for path in ("/sluice/v1/metadata", "/sluice/v1/groups", "/healthz"):
        raw = raw_request(
            b.port, f"GET {path} HTTP/1.1\r\nAuthorization: {AUTH}\r\n\r\n".encode(), timeout=5
        )
        assert status_of(raw) == 400, raw
        assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["error_code"] == "INVALID_REQUEST"
        for host_line in ("Host: x\r\n",):
            raw = raw_request(
                b.port,
                f"GET {path} HTTP/1.1\r\n{host_line}Authorization: {AUTH}\r\n"
                "Connection: close\r\n\r\n".encode(),
                timeout=5,
            )
            assert status_of(raw) == 200, raw
            server = _head_of(raw).get("server")
            assert server in (None, "Sluice"), server
    status, headers, _ = b.request("GET", "/sluice/v1/nothing-here")
    assert status == 404 and headers.get("Server") in (None, "Sluice")


MALFORMED = (
    b"GET /sluice/v1/metadata HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n",
    b"GET /sluice/v1/metadata HTTP/1.1\r\nHost: x\r\nX-Key: a\x00b\r\n\r\n",
    b"GE\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    b"POST /sluice/v1/producer-ids HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(64)),  # a TLS hello
)


@pytest.mark.parametrize("front", ["fast", "aiohttp"])
def test_malformed_requests_log_one_line_not_a_traceback_each(broker_factory, front):
    b = broker_factory(extra_args=[f"--http-front={front}"])
    for _ in range(5):
        for data in MALFORMED:
            raw = raw_request(b.port, data, timeout=5)
            if raw:  # a TLS hello may just be cut off
                assert status_of(raw) == 400, raw
                assert json.loads(raw.split(b"\r\n\r\n", 1)[1])["error_code"] == "INVALID_REQUEST"
    # the broker is fine and says so once, rate limited
    with socket.create_connection(("127.0.0.1", b.port), timeout=5):
        pass
    assert b.request("GET", "/sluice/v1/metadata")[0] == 200
    time.sleep(0.2)
    log = b.output()
    assert "Traceback" not in log and "Error handling request" not in log
    assert 1 <= log.count("malformed HTTP request") <= 2, log


def test_a_stored_value_nested_too_deeply_to_write_back_is_fetched_as_text(broker):
    """orjson reads JSON nested 1024 deep but writes only 254 levels: such a value (any
    tenant may produce one) once made every JSON fetch and JSON consume of it a 500."""
    nested = b"[" * 300 + b"]" * 300
    status, _, data = broker.request(
        "POST",
        f"/v3/clusters/{broker.cluster_id}/topics/events/records",
        {"value": {"type": "BINARY", "data": base64.b64encode(nested).decode()}},
    )
    assert status == 200, data
    offset = json.loads(data)["offset"]
    status, body = broker.json(
        "GET", f"/sluice/v1/topics/events/partitions/0/records?offset={offset}&format=json"
    )
    assert status == 200, body
    (record,) = body["records"]
    assert record["value_format"] == "text" and record["value"] == nested.decode()

    async def consume() -> dict:
        url = f"ws://127.0.0.1:{broker.port}/sluice/v1/ws/consume?topic=events&offset={offset}"
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, headers=broker.headers) as ws,
        ):
            await ws.send_json({"credit": 1 << 20})
            msg = await ws.receive(timeout=10)
            assert msg.type is aiohttp.WSMsgType.TEXT, (msg.type, msg.data)
            return json.loads(msg.data)

    message = asyncio.run(asyncio.wait_for(consume(), 20))
    values = [r["value"] for r in message.get("records", [])]
    assert nested.decode() in values, message
    assert "Traceback" not in broker.output()
