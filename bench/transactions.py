"""Transactional produce beside idempotent produce (docs/transactions.md), over the Kafka
listener with librdkafka (confluent-kafka), in the same run.

- ``produce.transactional.records_per_s``: a confluent-kafka Producer with a
  ``transactional.id`` sends 100-byte values into one partition in transactions of 100 ms
  (begin, ``produce_batch`` of 1,000 records in a tight loop, ``commit_transaction``; the
  commit's EndTxn, its marker and its wait for the marker inside the clock) for a fixed
  time. Peer: the same Producer settings without a ``transactional.id`` (idempotent,
  acks=all: what a transactional producer is underneath), the same batches, ``flush`` at
  the end inside the clock. Alternating rounds, each side's median round; target >= 0.8 of
  the idempotent rate.

Both clients use bench/kafka.py's throughput recipe (linger 10 ms, batches up to 100k
records or 1 MB) with idempotence on and acks=all, as transactions require, each in its own
process (``python -m bench.transactions <mode> ...``, one JSON line on stdout). One broker
with a Kafka listener and ``__transaction_state``, started as bench/kafka.py starts its
broker. ``SLUICE_BENCH_SMOKE=1`` shrinks it to a few seconds (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.kafka import (
    PRODUCE_RECIPE,
    REPO,
    VALUE_BYTES,
    _cpu,
    _last_json,
    _versions,
    client_config,
)

TXN_MS = 100  # one transaction's length
# bench/kafka.py's recipe with what transactions require: idempotence, acks=all
RECIPE = {**PRODUCE_RECIPE, "acks": "all", "enable.idempotence": True}
ROUNDS, SECONDS = (1, 1.0) if os.environ.get("SLUICE_BENCH_SMOKE") == "1" else (5, 4.0)
QUICK_ROUNDS, QUICK_SECONDS = 3, 2.0


def produce_worker(bootstrap: str, topic: str, mode: str, start_at: float, seconds: float):
    """``mode`` "transactional" (100 ms transactions) or "idempotent": 100-byte values to
    partition 0 from ``start_at`` for ``seconds``; every record acknowledged (committed)
    before the clock stops."""
    from confluent_kafka import Producer

    failed = [0]

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed[0] += 1

    transactional = mode == "transactional"
    extra = {"transactional.id": f"bench-{uuid.uuid4().hex[:8]}"} if transactional else {}
    producer = Producer(
        client_config(
            bootstrap,
            **RECIPE,
            **extra,
            on_delivery=on_delivery,
            **{"delivery.report.only.error": True},
        )
    )
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    producer.produce(topic, b"warm", partition=0)  # connect, authenticate, learn the leader
    if transactional:
        producer.commit_transaction(30)
    elif producer.flush(30) or failed[0]:
        raise RuntimeError("the warm-up record was not acknowledged")
    value = b"v" * VALUE_BYTES
    messages = [{"value": value} for _ in range(1000)]
    produce_batch, poll = producer.produce_batch, producer.poll
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    cpu0 = _cpu()
    start = time.monotonic()
    deadline = start + seconds
    sent = transactions = 0
    while time.monotonic() < deadline:
        if transactional:
            producer.begin_transaction()
        txn_end = min(deadline, time.monotonic() + TXN_MS / 1000)
        while time.monotonic() < txn_end:
            try:
                queued = produce_batch(topic, messages, partition=0)
            except BufferError:
                queued = 0
            sent += queued
            poll(0.001 if queued < len(messages) else 0)
        if transactional:
            producer.commit_transaction(60)  # flushes first: every record acknowledged
            transactions += 1
    left = 0 if transactional else producer.flush(60)
    end = time.monotonic()
    return {
        "records": sent,
        "transactions": transactions,
        "failed": failed[0] + left,
        "start": start,
        "end": end,
        "cpu_s": _cpu() - cpu0,
    }


def _round(bootstrap: str, topic: str, mode: str, seconds: float) -> dict:
    start_at = time.monotonic() + 1.5  # to import, connect, warm up
    command = [sys.executable, "-m", "bench.transactions", mode, bootstrap, topic]
    out = subprocess.run(
        [*command, repr(start_at), repr(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.transactions {mode} failed: {out.stderr[-3000:]}")
    result = _last_json(out.stdout, f"bench.transactions {mode}")
    if result["failed"]:
        raise RuntimeError(f"{result['failed']} {mode} records were not acknowledged")
    result["rate"] = result["records"] / (result["end"] - result["start"])
    return result


def run(quick: bool = False) -> list:
    """The transactional produce metric beside the idempotent one; one broker."""
    from bench.report import Metric
    from harness.broker import BrokerLauncher

    rounds, seconds = (QUICK_ROUNDS, QUICK_SECONDS) if quick else (ROUNDS, SECONDS)
    if os.environ.get("SLUICE_BENCH_SMOKE") == "1":
        rounds, seconds = ROUNDS, SECONDS
    base = Path(tempfile.mkdtemp(prefix="sluice-bench-txn-"))
    launcher = BrokerLauncher(base)
    topics = {
        "btxn": (1, {}),
        "bidem": (1, {}),
        "__transaction_state": (4, {"cleanup.policy": "compact"}),
    }
    txn: list[dict] = []
    idem: list[dict] = []
    try:
        broker = launcher(topics, kafka=True)
        _round(broker.bootstrap, "btxn", "transactional", min(seconds, 0.5))  # warm
        for _ in range(rounds):
            idem.append(_round(broker.bootstrap, "bidem", "idempotent", seconds))
            txn.append(_round(broker.bootstrap, "btxn", "transactional", seconds))
    finally:
        with contextlib.suppress(Exception):
            launcher.close()
        shutil.rmtree(base, ignore_errors=True)
    each = ", ".join(
        f"{t['rate'] / 1000:.0f}k vs {i['rate'] / 1000:.0f}k"
        for t, i in zip(txn, idem, strict=True)
    )
    per_round = statistics.median(t["transactions"] for t in txn)
    return [
        Metric(
            name="produce.transactional.records_per_s",
            value=round(statistics.median(t["rate"] for t in txn)),
            unit="records/s",
            better="higher",
            workload=(
                f"confluent-kafka {_versions()} transactional Producer in a process of its "
                f"own, 100-byte values into one partition over the Kafka listener "
                f"(SASL/PLAIN), bench/kafka.py's throughput recipe with idempotence and "
                f"acks=all, {TXN_MS} ms transactions (produce_batch() of 1,000 records in a "
                f"tight loop, then commit_transaction() inside the clock; {per_round:.0f} "
                f"transactions a round) for {seconds:g} s; one broker; median of {rounds} "
                f"rounds alternating with the peer; client CPU "
                f"{statistics.median(t['cpu_s'] for t in txn):.2f} s "
                f"per round (median)"
            ),
            peer=(
                f"the same Producer settings without transactional.id (idempotent, "
                f"acks=all), the same batches for {seconds:g} s then flush() inside the "
                f"clock, into another topic on the same broker; median of {rounds} rounds; "
                f"client CPU {statistics.median(i['cpu_s'] for i in idem):.2f} s per round"
            ),
            peer_value=round(statistics.median(i["rate"] for i in idem)),
            target_ratio=0.8,
            rounds=f"records/s, transactional vs idempotent: {each}",
        )
    ]


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.transactions")
    parser.add_argument("mode", choices=("transactional", "idempotent"))
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("start_at", type=float)
    parser.add_argument("seconds", type=float)
    a = parser.parse_args(argv)
    out = produce_worker(a.bootstrap, a.topic, a.mode, a.start_at, a.seconds)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
