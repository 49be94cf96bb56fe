"""One incarnation of the transactions scenario's consume-transform-produce worker, run as a
process of its own so the scenario can kill it (SIGKILL) or pause it (SIGSTOP, a zombie).

It reads the input topic (read_committed, assigned, the group's committed offsets), and for
each batch writes ``<input>><incarnation>.<n>`` to output partition ``<input number> %
partitions`` in a transaction that also commits the group's offsets; every ``abort_every``-th
transaction is aborted on purpose (and its inputs read again). It prints one JSON line per
event, flushed: ``start`` (the committed offsets it resumed from), ``txn`` (before writing),
``flushed`` (the outputs are in the log, undecided), ``commit`` (about to end it),
``committed``, ``aborted``, ``fenced``; and exits 0 once the input ends are committed, 3 on a
fatal error. When the file named ``die_in_commit`` appears, the next commit is cut short by
SIGKILL. The config is one JSON argument (see ``main``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT_S = 30.0
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def emit(event: str, **fields) -> None:
    print(json.dumps({"ev": event, **fields}), flush=True)


def retry(what, attempts: int = 10):
    """``what()`` again on a retriable librdkafka error (a coordinator moving), bounded."""
    for i in range(attempts):
        try:
            return what()
        except KafkaException as e:
            if not e.args[0].retriable() or i == attempts - 1:
                raise
            time.sleep(0.5)
    return None


def main(conf: dict) -> int:
    auth, topic_in = conf["client"], conf["input"]
    partitions, inc = conf["partitions"], conf["incarnation"]
    ends = {int(p): o for p, o in conf["ends"].items()}
    consumer = Consumer(
        {
            **auth,
            "group.id": conf["group"],
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {
            **auth,
            "transactional.id": conf["transactional_id"],
            "transaction.timeout.ms": 10_000,
            "request.timeout.ms": 5_000,
            "linger.ms": 5,
        }
    )
    retry(lambda: producer.init_transactions(TIMEOUT_S))
    wanted = [TopicPartition(topic_in, p) for p in range(partitions)]
    found = retry(lambda: consumer.committed(wanted, timeout=TIMEOUT_S))
    pos = {tp.partition: max(tp.offset, 0) for tp in found}
    emit("start", committed=pos)
    consumer.assign([TopicPartition(topic_in, p, o) for p, o in pos.items()])
    n = 0
    while any(pos[p] < ends[p] for p in ends):
        messages = [m for m in consumer.consume(conf["batch"], 0.5) if m.error() is None]
        if not messages:
            continue
        n += 1
        key = f"{inc}.{n}"
        after = dict(pos)
        outputs = {}
        for m in messages:
            value = m.value().decode()
            outputs[f"{value}>{key}"] = int(value[1:]) % partitions
            after[m.partition()] = m.offset() + 1
        emit("txn", key=key, outputs=outputs, before=pos, after=after)
        if end_one(conf, producer, consumer, key, outputs, after, n):
            pos = after
        else:  # aborted: read its inputs again
            for p, o in pos.items():
                consumer.seek(TopicPartition(topic_in, p, o))
    consumer.close()
    return 0


def die_in_commit(conf) -> None:
    """When the scenario has created the ``die_in_commit`` file: remove it and have this
    process killed (SIGKILL) a few milliseconds into the commit about to start, so the kill
    lands while EndTxn is in flight (a kill from outside, timed by the events, lands there
    only by chance)."""
    flag = Path(conf["die_in_commit"])
    if not flag.exists():
        return
    flag.unlink()
    threading.Timer(0.005, os.kill, (os.getpid(), signal.SIGKILL)).start()


def end_one(conf, producer, consumer, key, outputs, after, n) -> bool:
    """One transaction; True if committed, False if aborted; exits on a fatal error."""
    try:
        producer.begin_transaction()
        for value, partition in outputs.items():
            producer.produce(conf["output"], value.encode(), partition=partition)
        offsets = [TopicPartition(conf["input"], p, o) for p, o in after.items()]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        producer.flush(TIMEOUT_S)
        emit("flushed", key=key)
        time.sleep(conf["delay_s"])  # the window a kill or a pause lands in
        if conf["abort_every"] and n % conf["abort_every"] == 0:
            raise KafkaException(KafkaError(KafkaError._STATE, "aborted on purpose"))
        emit("commit", key=key)
        die_in_commit(conf)
        retry(lambda: producer.commit_transaction(TIMEOUT_S))
        emit("committed", key=key)
        return True
    except KafkaException as e:
        error: KafkaError = e.args[0]
        if error.code() in FENCED or error.fatal():
            emit("fenced" if error.code() in FENCED else "fatal", key=key, error=str(error))
            sys.exit(3)
        retry(lambda: producer.abort_transaction(TIMEOUT_S))
        emit("aborted", key=key, error=str(error))
        return False


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
