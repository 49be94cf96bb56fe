"""``GET .../partitions/{p}/producers/{id}``: a producer's last sequence and offsets on a
partition, as the leader's idempotent-producer state has them (docs/data-plane-api.md)."""

from __future__ import annotations

import json

from brokernodes.records.batch import Record, encode_batch

BATCH = "application/vnd.kafka.recordbatch.v2"
PID = (1 << 62) | 12345  # a client-chosen id: the brokers never allocate this range


def _produce(broker, seq: int, n: int) -> dict:
    body = encode_batch(
        [Record(1_700_000_000_000 + i, None, b"v%d" % i) for i in range(n)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=seq,
    )
    status, _, answer = broker.request(
        "POST",
        "/sluice/v1/topics/orders/partitions/0/batches?acks=all",
        body,
        headers={"Content-Type": BATCH},
    )
    assert status == 200, answer
    return json.loads(answer)


def _describe(broker, producer_id, partition=0):
    status, _, body = broker.request(
        "GET", f"/sluice/v1/topics/orders/partitions/{partition}/producers/{producer_id}"
    )
    return status, json.loads(body)


def test_a_producers_last_batch_and_the_high_watermark(broker):
    status, doc = _describe(broker, PID)
    assert status == 200
    assert doc["last_sequence"] == -1 and doc["producer_epoch"] == -1

    _produce(broker, 0, 3)
    second = _produce(broker, 3, 4)
    status, doc = _describe(broker, PID)
    assert status == 200
    assert doc == {
        "producer_id": PID,
        "producer_epoch": 0,
        "last_sequence": 6,
        "last_offset": second["last_offset"],
        "last_batch_first_sequence": 3,
        "last_batch_first_offset": second["base_offset"],
        "high_watermark": second["last_offset"] + 1,
    }
    # another producer, another partition: nothing
    assert _describe(broker, PID + 1)[1]["last_sequence"] == -1
    assert _describe(broker, PID, partition=1)[1]["last_sequence"] == -1


def test_bad_ids_and_credentials_are_refused(broker):
    status, doc = _describe(broker, "abc")
    assert status == 400 and doc["error_code"] == "INVALID_REQUEST"
    assert "non-negative integer" in doc["message"]
    status, _, body = broker.request(
        "GET", f"/sluice/v1/topics/orders/partitions/0/producers/{PID}", auth=False
    )
    assert status == 401, body
