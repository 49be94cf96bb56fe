"""A consume-transform-produce worker for the exactly-once tests, run as its own process so
a test can kill it with SIGKILL mid-transaction: it reads ``ctp-in`` (read_committed, the
group's committed offsets), writes each value with ``in`` replaced by ``out`` to ``ctp-out``
in a transaction that also commits the group's offsets, and prints ``open`` once a
transaction's records are written and ``committed`` after each commit. It exits after
``idle_s`` without input.

    python tests/integration/kafka/txn_worker.py BOOTSTRAP TRANSACTIONAL_ID GROUP DELAY_S IDLE_S
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from harness.broker import KEY_ID, SECRET


def main(bootstrap: str, tid: str, group: str, delay_s: float, idle_s: float) -> None:
    auth = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": KEY_ID,
        "sasl.password": SECRET,
    }
    consumer = Consumer(
        {
            **auth,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition("ctp-in", p) for p in range(2)])
    producer = Producer({**auth, "transactional.id": tid, "transaction.timeout.ms": 30_000})
    producer.init_transactions(30)
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < idle_s:
        messages = [m for m in consumer.consume(num_messages=5, timeout=0.5) if not m.error()]
        if not messages:
            continue
        quiet_since = time.monotonic()
        producer.begin_transaction()
        for m in messages:
            producer.produce("ctp-out", m.value().replace(b"in", b"out"), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.flush(30)  # the records are in the log, uncommitted
        print("open", flush=True)
        time.sleep(delay_s)  # the window a SIGKILL lands in
        producer.commit_transaction(30)
        print("committed", flush=True)
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
