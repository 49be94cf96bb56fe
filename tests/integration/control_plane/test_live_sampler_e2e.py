"""The control plane's sampler of the live series against a real broker process: two
samples around records produced by one tenant store that topic's throughput minutes, served
to that tenant by the reports API (and to no other), as when ``make up`` runs without the
live Spark job (backend/analytics/live_sampler.py)."""

from __future__ import annotations

import json

from harness.control_plane import ControlPlane, create_topic
from harness.control_plane import RestProducer as Producer

SAMPLE = (
    "import json; from backend.analytics.live_sampler import sample; "
    "print(json.dumps(sample(), default=str))"
)


def test_two_samples_store_a_tenants_throughput_from_the_brokers_metrics(
    control_plane: ControlPlane,
):
    cp = control_plane
    alpha, bravo = cp.tenant("alpha"), cp.tenant("bravo")
    broker = cp.start_broker(1)
    create_topic(cp, broker, "orders", alpha["api_key"])
    first = json.loads(cp.manage("shell", "-c", SAMPLE).strip().splitlines()[-1])
    assert first["errors"] == [] and first["throughput"] == 0  # the first reading only
    producer = Producer(broker.url, "orders", alpha["api_key"])
    sent = 0
    for i in range(25):
        status, body, _, _ = producer.send(f"order-{i}")
        assert status == 200, body
        sent += 1
    producer.close()
    second = json.loads(cp.manage("shell", "-c", SAMPLE).strip().splitlines()[-1])
    assert second["errors"] == [] and second["throughput"] >= 1, second

    status, doc = cp.api("GET", "reports/live/throughput/?topic=orders", key=alpha["api_key"])
    assert status == 200, doc
    (total,) = doc["totals"]
    assert total["records_in"] == sent and total["bytes_in"] > 0, total
    assert doc["as_of"] is not None and doc["measured_from"] is not None
    status, theirs = cp.api("GET", "reports/live/throughput/", key=bravo["api_key"])
    assert status == 200 and theirs["rows"] == [] and theirs["totals"] == [], theirs
