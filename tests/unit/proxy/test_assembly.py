"""The REST proxy is installed by the process entry point, not by the broker core."""

import json
import subprocess
import sys

from brokernodes import broker_main, proxy
from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import StaticMetadataSource

PROXY_ROUTES = {"v2_consumer_create", "v2_records", "v2_commit", "ws_groups"}


def _broker(tmp_path) -> Broker:
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"cluster_id": "c", "broker_id": 1, "brokers": []}))
    return Broker(BrokerConfig(str(meta), str(tmp_path), 0), StaticMetadataSource(meta))


def _route_names(app) -> set[str]:
    return {r.name for r in app.router.routes() if r.name}


def test_the_broker_core_alone_serves_no_proxy_routes(tmp_path):
    names = _route_names(build_app(_broker(tmp_path)))
    assert not names & PROXY_ROUTES
    assert {"cursor_new", "cursor_read", "group_describe", "ws_consume"} <= names


def test_the_entry_point_installs_the_proxy_routes(tmp_path):
    assert proxy.add_routes in broker_main.ROUTES
    names = _route_names(build_app(_broker(tmp_path), broker_main.ROUTES))
    assert names >= PROXY_ROUTES | {"cursor_new", "group_describe"}


def test_python_m_brokernodes_runs_the_entry_point():
    out = subprocess.run(
        [sys.executable, "-c", "import brokernodes.__main__ as m; print(m.main.__module__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "brokernodes.broker_main"
