"""The Spark source's broker calls (``spark.datasource.broker.BrokerClient``) against a real
broker on loopback: the bootstrap walk, the errors it raises (codes and the fields
``read_range`` uses), and reads that carry on across a broker restart. No Spark session."""

from __future__ import annotations

import pytest

from spark.datasource.broker import BrokerClient, BrokerReadError, PartitionMeta, read_range
from tests.integration.conftest import API_KEY, free_port

BATCH = "application/vnd.kafka.recordbatch.v2"


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def broker(broker_factory):
    return broker_factory({"reads": (2, {})})


def produce(broker, n: int) -> None:
    for i in range(n):
        status, _, body = broker.request(
            "POST",
            "/v3/clusters/test-cluster/topics/reads/records",
            {"partition_id": 0, "value": {"type": "STRING", "data": f"v{i}"}},
        )
        assert status == 200, body


def test_the_bootstrap_walk_skips_brokers_that_do_not_answer(broker):
    client = BrokerClient(f"{dead_url()},{broker.url}", API_KEY, timeout_s=2)
    try:
        assert [m.partition for m in client.partitions("reads")] == [0, 1]
    finally:
        client.close()
    client = BrokerClient(f"{dead_url()},{dead_url()}", API_KEY, timeout_s=2)
    with pytest.raises(BrokerReadError, match="no bootstrap broker answered") as e:
        client.metadata()
    assert e.value.error_code == "BROKER_UNREACHABLE"
    assert "reachable from the Spark executors" in str(e.value)


def test_errors_carry_the_brokers_code_and_fields(broker):
    produce(broker, 3)
    client = BrokerClient(broker.url, API_KEY)
    try:
        (meta,) = [m for m in client.partitions("reads") if m.partition == 0]
        with pytest.raises(BrokerReadError) as e:
            client.fetch(meta, 50)
        assert e.value.error_code == "OFFSET_OUT_OF_RANGE"
        assert e.value.body["log_start_offset"] == 0 and e.value.body["log_end_offset"] == 3
        nope = PartitionMeta("nope", 0, meta.leader, meta.leader_url)
        with pytest.raises(BrokerReadError, match="UNKNOWN_TOPIC_OR_PARTITION") as e:
            client.list_offset(nope, "latest")
        assert e.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(BrokerReadError, match="not in the cluster metadata"):
            client.partitions("nope")
    finally:
        client.close()
    wrong = BrokerClient(broker.url, "sk_test.wrong")
    with pytest.raises(BrokerReadError) as e:
        wrong.metadata()
    assert e.value.error_code == "UNAUTHENTICATED"


def test_a_read_carries_on_after_the_broker_restarts(broker):
    produce(broker, 5)
    client = BrokerClient(broker.url, API_KEY)
    try:
        (meta,) = [m for m in client.partitions("reads") if m.partition == 0]
        assert client.list_offset(meta, "latest") == 5
        broker.restart()  # the kept-alive connection is gone; the next GET reopens it
        assert [r.offset for r, _ in read_range(client, meta, 0, 5)] == list(range(5))
    finally:
        client.close()


def test_bad_options_are_refused_before_any_request():
    with pytest.raises(ValueError, match="exactly one of an API key and the cluster secret"):
        BrokerClient("http://127.0.0.1:1", API_KEY, cluster_secret="x")
    with pytest.raises(ValueError, match="exactly one"):
        BrokerClient("http://127.0.0.1:1")
    with pytest.raises(ValueError, match="at least one broker URL"):
        BrokerClient(" , ", API_KEY)
    with pytest.raises(ValueError, match="must be http:// or https://"):
        BrokerClient("ftp://127.0.0.1:1", API_KEY).metadata()
