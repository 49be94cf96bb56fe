"""A broker that leads no ``__usage`` partition sends its usage windows to the leader with
the cluster secret; the leader admits that one write and nothing else."""

from __future__ import annotations

import time

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.server.usage import decode_usage
from tests.integration.conftest import free_port, make_metadata

SECRET = "forwarding-secret"
BATCH = "application/vnd.kafka.recordbatch.v2"
TOPICS = {"orders": (1, {}), "__usage": (1, {})}
LEADERS = {"orders": [2], "__usage": [1]}


def test_usage_of_a_broker_leading_no_usage_partition_reaches_the_leader(broker_factory):
    p1, p2 = free_port(), free_port()
    env = {"SLUICE_CLUSTER_SECRET": SECRET, "SLUICE_USAGE_INTERVAL_S": "0.3"}
    docs = {
        1: make_metadata(
            p1,
            TOPICS,
            broker_id=1,
            leaders=LEADERS,
            other_brokers=[{"id": 2, "url": f"http://127.0.0.1:{p2}"}],
        ),
        2: make_metadata(
            p2,
            TOPICS,
            broker_id=2,
            leaders=LEADERS,
            other_brokers=[{"id": 1, "url": f"http://127.0.0.1:{p1}"}],
        ),
    }
    b1 = broker_factory(metadata=docs[1], port=p1, env=env, name="b1")
    b2 = broker_factory(metadata=docs[2], port=p2, env=env, name="b2")
    batch = encode_batch([Record(1, b"k", b"x" * 50)])
    status, _, body = b2.request(
        "POST",
        "/sluice/v1/topics/orders/partitions/0/batches",
        batch,
        headers={"Content-Type": BATCH},
    )
    assert status == 200, body

    def forwarded():
        status, _, raw = b1.request(
            "GET", "/sluice/v1/topics/__usage/partitions/0/batches?offset=0&max_bytes=1048576"
        )
        assert status == 200
        rows = [decode_usage(r.value) for b in decode_batches(raw) for r in b.records]
        return [r for r in rows if r.broker_id == 2 and r.topic == "orders" and r.bytes_in]

    deadline = time.monotonic() + 20
    rows = forwarded()
    while not rows and time.monotonic() < deadline:
        time.sleep(0.2)
        rows = forwarded()
    assert rows and sum(r.bytes_in for r in rows) == len(batch)
    assert {r.principal for r in rows} == {"User:test"}
    # the cluster credential writes __usage only
    status, _, body = b2.request(
        "POST",
        "/sluice/v1/topics/orders/partitions/0/batches",
        batch,
        headers={"Content-Type": BATCH, "Authorization": f"Cluster {SECRET}"},
    )
    assert status == 401, body
