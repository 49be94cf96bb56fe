"""The broker's pass-through of Confluent's admin paths to the control plane: which URL and
headers a request is sent on with (pure helpers), and which paths reach the pass-through at
all (the broker's own routes win)."""

from __future__ import annotations

import asyncio
import json

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from brokernodes.broker_main import ROUTES
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.http.control_plane_pass import forwarded_headers, target_of
from brokernodes.server.metadata.cluster import StaticMetadataSource
from brokernodes.server.protocol.request import SluiceRequest


def _request(path: str, query: str = "", **headers: str) -> SluiceRequest:
    h = CIMultiDictProxy(CIMultiDict({k.replace("_", "-"): v for k, v in headers.items()}))
    return SluiceRequest("GET", path, query, {}, h, None, None, "10.0.0.7")


def test_the_target_keeps_path_and_query():
    r = _request("/v3/clusters/c/topics/t/configs:alter", "validate_only=true&x=a%20b")
    assert target_of("http://cp:8000", r) == (
        "http://cp:8000/v3/clusters/c/topics/t/configs:alter?validate_only=true&x=a+b"
    )
    assert target_of("http://cp:8000", _request("/topics")) == "http://cp:8000/topics"
    assert target_of("http://cp", _request("/v3/clusters/c/consumer-groups/a b")) == (
        "http://cp/v3/clusters/c/consumer-groups/a%20b"
    )


def test_the_callers_credentials_and_media_types_go_on_with_the_host_it_called():
    r = _request(
        "/v3/clusters",
        Authorization="Bearer k.s",
        Accept="application/json",
        Cookie="sessionid=x",
        Host="broker-1:8082",
        X_Forwarded_Proto="https",
    )
    assert forwarded_headers(r) == {
        "Authorization": "Bearer k.s",
        "Accept": "application/json",
        "X-Forwarded-Host": "broker-1:8082",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-For": "10.0.0.7",
    }


def test_only_paths_no_broker_route_serves_reach_the_pass_through(tmp_path):
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"cluster_id": "c", "broker_id": 1, "brokers": []}))
    broker = Broker(BrokerConfig(str(meta), str(tmp_path), 0), StaticMetadataSource(meta))
    app = build_app(broker, ROUTES)

    def route_of(method: str, path: str) -> str:
        """The name of the route the broker's own router picks."""
        request = make_mocked_request(method, path, app=app)
        match = asyncio.run(app.router.resolve(request))
        return match.route.name or ""

    assert route_of("POST", "/v3/clusters/c/topics/t/records") == "produce_json"
    assert route_of("POST", "/v3/clusters/c/topics/t/records:batch") == "produce_json_batch"
    assert route_of("GET", "/v3/clusters/c/topics/t/records").startswith("control_plane_v3")
    assert route_of("POST", "/v3/clusters/c/topics").startswith("control_plane_v3")
    assert route_of("GET", "/v3/clusters").startswith("control_plane_v3")
    assert route_of("GET", "/topics/t").startswith("control_plane_v2")
    assert route_of("GET", "/brokers").startswith("control_plane_v2")
    assert not route_of("POST", "/topics/t").startswith("control_plane")  # v2 produce
