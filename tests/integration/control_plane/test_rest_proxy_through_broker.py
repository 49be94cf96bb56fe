"""Confluent's admin resources through one broker: a real control plane and a real broker
process; a user given only the broker's URL discovers the cluster id, creates and configures
a topic, produces to it (the broker's own record route), reads its consumer group's lags,
and reads v2 metadata, all through that broker, which passes the admin calls to the control
plane unchanged (brokernodes/server/http/control_plane_pass.py)."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request

from .conftest import ControlPlane, wait_for

V2 = "application/vnd.kafka.v2+json"


def call(method: str, url: str, body=None, *, key: str | None, accept: str | None = None):
    """(status, parsed body or None, headers) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            raw, status, headers = r.read(), r.status, r.headers
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            raw, status, headers = e.read(), e.code, e.headers
    return status, (json.loads(raw) if raw else None), headers


def test_one_broker_url_reaches_the_v3_admin_resources_and_v2_metadata(
    control_plane: ControlPlane,
):
    cp = control_plane
    ka, kb = cp.tenant("alpha")["api_key"], cp.tenant("bravo")["api_key"]
    broker = cp.start_broker(1, kafka=True)
    base = broker.url

    # v3 clients first learn the cluster id; links name the broker they called
    status, clusters, headers = call("GET", f"{base}/v3/clusters", key=ka)
    assert status == 200, clusters
    assert headers["Content-Type"].startswith("application/json")
    assert clusters["kind"] == "KafkaClusterList"
    assert clusters["metadata"]["self"] == f"{base}/v3/clusters"
    cid = clusters["data"][0]["cluster_id"]
    assert cid == "sluice-local"
    v3 = f"{base}/v3/clusters/{cid}"
    assert clusters["data"][0]["controller"] == {"related": f"{v3}/brokers/1"}

    status, brokers, _ = call("GET", f"{v3}/brokers", key=ka)
    assert status == 200, brokers
    (b1,) = brokers["data"]
    assert (b1["broker_id"], b1["host"], b1["port"]) == (1, "127.0.0.1", broker.kafka_port)

    # create and configure a topic
    request = {
        "topic_name": "orders",
        "partitions_count": 2,
        "replication_factor": 1,
        "configs": [{"name": "retention.ms", "value": "3600000"}],
    }
    status, topic, _ = call("POST", f"{v3}/topics", request, key=ka)
    assert status == 201, topic
    assert topic["metadata"]["self"] == f"{v3}/topics/orders"
    assert (topic["partitions_count"], topic["replication_factor"]) == (2, 1)
    status, body, _ = call(
        "PUT", f"{v3}/topics/orders/configs/cleanup.policy", {"value": "delete"}, key=ka
    )
    assert (status, body) == (204, None)
    status, config, _ = call("GET", f"{v3}/topics/orders/configs/retention.ms", key=ka)
    assert status == 200 and config["value"] == "3600000" and not config["is_default"]

    # the broker's own record route still answers produce (it is matched first)
    def produce(partition: int):
        return call(
            "POST",
            f"{v3}/topics/orders/records",
            {"partition_id": partition, "value": {"type": "STRING", "data": "x"}},
            key=ka,
        )

    wait_for("the topic on the broker", lambda: produce(0)[0] == 200, 30)
    for _ in range(2):
        assert produce(0)[0] == 200
    status, partitions, _ = call("GET", f"{v3}/topics/orders/partitions", key=ka)
    assert status == 200, partitions
    assert [p["leader"] for p in partitions["data"]] == [
        {"related": f"{v3}/topics/orders/partitions/{p}/replicas/1"} for p in (0, 1)
    ]

    # a consumer group with a committed offset: its lag through the broker
    def commit() -> bool:
        status, _, _ = call(
            "POST",
            f"{base}/sluice/v1/groups/audit/offsets",
            {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]},
            key=ka,
        )
        return status == 200

    wait_for("the group coordinator", commit, 30)
    status, groups, _ = call("GET", f"{v3}/consumer-groups", key=ka)
    assert status == 200, groups
    assert [g["consumer_group_id"] for g in groups["data"]] == ["audit"]
    status, group, _ = call("GET", f"{v3}/consumer-groups/audit", key=ka)
    assert status == 200, group
    assert group["kind"] == "KafkaConsumerGroup" and group["state"] == "EMPTY"
    assert group["coordinator"] == {"related": f"{v3}/brokers/1"}
    status, lags, _ = call("GET", f"{v3}/consumer-groups/audit/lags", key=ka)
    assert status == 200, lags
    (lag,) = lags["data"]
    assert (lag["topic_name"], lag["partition_id"]) == ("orders", 0)
    assert (lag["current_offset"], lag["log_end_offset"], lag["lag"]) == (1, 3, 2)
    status, one, _ = call("GET", f"{v3}/consumer-groups/audit/lags/orders/partitions/0", key=ka)
    assert status == 200 and one == lag
    status, summary, _ = call("GET", f"{v3}/consumer-groups/audit/lag-summary", key=ka)
    assert status == 200, summary
    assert (summary["total_lag"], summary["max_lag"], summary["max_lag_partition_id"]) == (2, 2, 0)
    assert summary["max_lag_partition"] == {"related": f"{v3}/topics/orders/partitions/0"}

    # v2 metadata reads through the same broker
    status, names, headers = call("GET", f"{base}/topics", key=ka, accept=V2)
    assert (status, names) == (200, ["orders"])
    assert headers["Content-Type"].startswith(V2)
    status, t, _ = call("GET", f"{base}/topics/orders", key=ka, accept=V2)
    assert status == 200 and t["name"] == "orders" and t["configs"]["retention.ms"] == "3600000"
    assert [p["partition"] for p in t["partitions"]] == [0, 1]
    assert t["partitions"][0]["replicas"] == [{"broker": 1, "leader": True, "in_sync": True}]
    status, v2_brokers, _ = call("GET", f"{base}/brokers", key=ka, accept=V2)
    assert (status, v2_brokers) == (200, {"brokers": [1]})

    # tenancy and errors, passed through as the control plane gave them
    status, err, _ = call("GET", f"{v3}/topics/orders", key=kb)
    assert (status, err["error_code"], err["sluice_code"]) == (404, 40403, "NOT_FOUND")
    status, err, _ = call("GET", f"{base}/topics/orders", key=kb, accept=V2)
    assert (status, err["error_code"], err["sluice_code"]) == (404, 40401, "NOT_FOUND")
    status, none, _ = call("GET", f"{v3}/consumer-groups", key=kb)
    assert (status, none["data"]) == (200, [])
    status, err, headers = call("GET", f"{v3}/topics", key=None)
    assert (status, err["error_code"], err["sluice_code"]) == (401, 40101, "NOT_AUTHENTICATED")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    status, err, _ = call("GET", f"{base}/v3/clusters/other/topics", key=ka)
    assert (status, err["error_code"], err["sluice_code"]) == (404, 404, "NOT_FOUND")

    status, body, _ = call("DELETE", f"{v3}/topics/orders", key=ka)
    assert (status, body) == (204, None)
    status, listing, _ = call("GET", f"{v3}/topics", key=ka)
    assert listing["data"] == []


def test_a_broker_answers_503_when_its_control_plane_is_down(control_plane: ControlPlane):
    cp = control_plane
    key = cp.tenant("alpha")["api_key"]
    broker = cp.start_broker(1)
    assert call("GET", f"{broker.url}/v3/clusters", key=key)[0] == 200
    cp.server.stop()
    status, err, headers = call("GET", f"{broker.url}/v3/clusters", key=key)
    assert status == 503, err
    assert (err["error_code"], err["sluice_code"]) == (503, "CONTROL_PLANE_UNAVAILABLE")
    assert headers["Retry-After"] == "1"
