"""The whole path under the control plane: a broker meters a tenant's traffic into the
internal ``__usage`` topic, the usage and throughput jobs read it and the tenant's topic with
the operators' credential, the control plane stores the rows and the reports API serves them
to that tenant only. Tenant keys cannot read ``__usage``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.control_plane.conftest import (  # noqa: F401  (fixtures)
    ControlPlane,
    control_plane,
    control_plane_env,
    http,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
CLUSTER = "sluice-local"


@pytest.fixture
def control_plane_env() -> dict[str, str]:  # noqa: F811
    return {
        "SLUICE_USAGE_INTERVAL_S": "0.5",
        "SPARK_MASTER": "local[2]",
        "SPARK_SHUFFLE_PARTITIONS": "2",
    }


def test_usage_and_throughput_reports_end_to_end(control_plane: ControlPlane):  # noqa: F811
    cp = control_plane
    alpha, bravo = cp.tenant("alpha"), cp.tenant("bravo")
    broker = cp.start_broker(1)
    status, body = cp.api(
        "POST",
        "topics/",
        {"name": "orders", "partitions": 1, "replication_factor": 1},
        key=alpha["api_key"],
    )
    assert status == 201, body

    def produce():
        return http(
            "POST",
            f"{broker.url}/v3/clusters/{CLUSTER}/topics/orders/records:batch",
            {
                "entries": [
                    {"id": str(i), "value": {"type": "STRING", "data": "x" * 100}}
                    for i in range(10)
                ]
            },
            key=alpha["api_key"],
        )

    wait_for("alpha's topic on the broker", lambda: produce()[0] == 207, timeout=30)
    for _ in range(4):
        assert produce()[0] == 207
    status, body = http(
        "GET",
        f"{broker.url}/sluice/v1/topics/__usage/partitions/0/batches?offset=0",
        key=alpha["api_key"],
    )
    assert status == 404 and body["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"

    script = (
        "import json; from backend.analytics import services\n"
        "out = {}\n"
        "for job in ('usage', 'throughput'):\n"
        "    r = services.run_execute(services.run_request(job=job, enqueue=False).id)\n"
        "    out[job] = [r.status, r.rows_written, r.error]\n"
        "print(json.dumps(out))\n"
    )

    time.sleep(2.0)  # four metering intervals: the windows are in __usage
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=cp.env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(s == "succeeded" for s, _, _ in out.values()), out
    rows = cp.api("GET", "reports/usage/?granularity=hour&days=1", key=alpha["api_key"])[1]
    (usage,) = [r for r in rows["rows"] if r["topic"] == "orders" and r["bytes_in"] > 0]
    assert usage["service_account"] == "alpha-app" and usage["requests"] >= 5
    throughput = cp.api("GET", "reports/throughput/?granularity=minute", key=alpha["api_key"])[1][
        "rows"
    ]
    assert sum(r["records"] for r in throughput if r["topic"] == "orders") == 50
    assert sum(r["bytes"] for r in throughput) == 50 * 100
    for path in ("reports/usage/", "reports/throughput/?granularity=minute"):
        assert cp.api("GET", path, key=bravo["api_key"])[1]["rows"] == []
    runs = cp.api("GET", "reports/runs/", key=bravo["api_key"])[1]["results"]
    assert {r["job"] for r in runs} >= {"usage", "throughput"}
