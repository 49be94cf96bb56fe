"""Confluent REST Proxy v2 consumer instances with ``isolation.level``: on a real broker
process, a confluent-kafka transactional producer commits one transaction and aborts
another; a read_committed instance returns the committed records only, a read_uncommitted
one all of them, and an unknown level is a clear 400."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.groups.conftest import http_json
from tests.integration.kafka.conftest import confluent_config

TOPIC = "txnlog-rest"
TOPICS = {TOPIC: (1, {}), "__transaction_state": (1, {"cleanup.policy": "compact"})}
T = 30.0


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path)
    try:
        yield launcher(TOPICS, kafka=True)
    finally:
        launcher.close()


def instance_values(b: BrokerProcess, name: str, want: int, **config) -> list[str]:
    s, inst = http_json(
        "POST",
        f"{b.url}/consumers/txnlog-g",
        {"name": name, "format": "string", "auto.offset.reset": "earliest", **config},
        key=b.api_key,
    )
    assert s == 200, inst
    base = inst["base_uri"]
    s, body = http_json(
        "POST",
        base + "/assignments",
        {"partitions": [{"topic": TOPIC, "partition": 0}]},
        key=b.api_key,
    )
    assert s == 204, body
    got: list[str] = []
    deadline = time.monotonic() + T
    while len(got) < want and time.monotonic() < deadline:
        s, recs = http_json("GET", base + "/records?timeout=500", key=b.api_key)
        assert s == 200, recs
        got += [r["value"] for r in recs]
    s, recs = http_json("GET", base + "/records?timeout=1000", key=b.api_key)
    got += [r["value"] for r in recs]  # nothing more should come
    http_json("DELETE", base, key=b.api_key)
    return got


def test_rest_consumer_instances_take_the_isolation_level(broker):
    p = Producer(confluent_config(broker.bootstrap, **{"transactional.id": "txnlog-rest"}))
    p.init_transactions(T)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, b"c%d" % i, partition=0)
    p.commit_transaction(T)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, b"a%d" % i, partition=0)
    p.flush(T)
    p.abort_transaction(T)

    committed = instance_values(broker, "rc", 3, **{"isolation.level": "read_committed"})
    assert committed == ["c0", "c1", "c2"]
    everything = instance_values(broker, "ru", 6)
    assert everything == ["c0", "c1", "c2", "a0", "a1", "a2"]
    s, err = http_json(
        "POST",
        f"{broker.url}/consumers/txnlog-g",
        {"name": "bad", "isolation.level": "serializable"},
        key=broker.api_key,
    )
    assert s == 400 and "read_uncommitted or read_committed" in err["message"], err
