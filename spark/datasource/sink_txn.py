"""The Spark sink's transactional mode (option ``transactional.id.prefix``): a write becomes
visible to read_committed consumers all at once, or not at all.

Each task writes its rows in one transaction of its own transactional id,
``<prefix><write id>-<batch id>-<Spark partition>`` (the same for every attempt of the task),
and leaves it open: its commit message carries the producer id and epoch. The driver's
``commit`` ends every task's transaction with a commit (``POST
/sluice/v1/transactions/{id}/end``), its ``abort`` with an abort. A retried attempt's
``init_transactions`` bumps the epoch, which aborts whatever the failed attempt wrote (and
fences it, should it still be running), so it writes its rows again from the start; a task
that fails aborts its own transaction first, so read_committed readers are not held back
until the transaction's timeout.

Limits: ``transaction.timeout.ms`` (default and most 15 min) must cover the write from the
first task's first record to the driver's commit, or the coordinator aborts a task's
transaction and the commit fails (PRODUCER_FENCED); the driver's ends are one call per task,
so a driver that dies half-way through them leaves the rest open until that timeout aborts
them (those it had committed stay committed).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from brokernodes.client.transactional import TransactionalProducer
from spark.datasource.sink_identity import SinkError

logger = logging.getLogger("sluice.spark.sink")

MAX_TIMEOUT_MS = 900_000
END_RETRY_S = 30.0
RETRIABLE = frozenset(
    {
        "CONCURRENT_TRANSACTIONS",
        "NOT_COORDINATOR",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "LEADER_NOT_AVAILABLE",
        "NETWORK_EXCEPTION",
    }
)


def transactional_id(prefix: str, write_id: str, batch_id: int, spark_partition: int) -> str:
    return f"{prefix}{write_id}-{batch_id}-{spark_partition}"


class TxnSinkProducer(TransactionalProducer):
    """The blocking transactional producer plus what the sink's task loop asks of a
    producer (``partitions_of``, ``producer_id``)."""

    @property
    def producer_id(self) -> int:
        return self._producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer._producer_epoch

    def partitions_of(self, topic: str) -> int:
        producer = self._producer
        if topic not in producer._topics:
            self._thread.run(producer._refresh_metadata(), self.max_block_s)
            if topic not in producer._topics:
                producer.metadata.topic(topic)  # raises UnknownTopicError
        return producer._topics[topic].num_partitions


def open_transaction(options: Any, tid: str) -> TxnSinkProducer:
    """A producer of ``tid`` in a fresh transaction (earlier attempts' fenced and aborted)."""
    producer = TxnSinkProducer(
        options.bootstrap,
        options.api_key,
        transactional_id=tid,
        transaction_timeout_ms=options.txn_timeout_ms,
        compression=options.compression,
        batch_size=options.batch_size,
        linger_ms=options.linger_ms,
    )
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
    except BaseException:
        producer.close(timeout=5)
        raise
    return producer


@dataclass(frozen=True)
class TxnEnd:
    transactional_id: str
    producer_id: int
    producer_epoch: int


def end_transactions(options: Any, ends: list[TxnEnd], commit: bool) -> None:
    """On the driver: end each task's transaction (through any broker, which forwards to
    the coordinator), retrying what is retriable for ``END_RETRY_S``. An abort that fails
    is logged (the transaction's timeout aborts it); a commit that fails raises."""
    for end in ends:
        try:
            _end(options, end, commit)
        except SinkError:
            if commit:
                raise
            logger.warning("sluice sink: aborting %s failed", end.transactional_id, exc_info=True)


def _end(options: Any, end: TxnEnd, commit: bool) -> None:
    body = json.dumps(
        {"producer_id": end.producer_id, "producer_epoch": end.producer_epoch, "commit": commit}
    ).encode()
    deadline = time.monotonic() + END_RETRY_S
    attempt = 0
    while True:
        url = options.bootstrap[attempt % len(options.bootstrap)]
        attempt += 1
        path = f"/sluice/v1/transactions/{quote(end.transactional_id, safe='')}/end"
        req = urllib.request.Request(
            url + path,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {options.api_key}",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
            return
        except urllib.error.HTTPError as e:
            try:
                doc = json.loads(e.read() or b"{}")
            except ValueError:
                doc = {}
            code = str(doc.get("error_code") or f"HTTP_{e.code}")
            message = str(doc.get("message") or e.reason)
            if (code not in RETRIABLE and e.code < 500) or time.monotonic() > deadline:
                verb = "commit" if commit else "abort"
                raise SinkError(
                    f"could not {verb} the transaction of {end.transactional_id}: {message}",
                    code,
                ) from None
        except OSError as e:
            if time.monotonic() > deadline:
                raise SinkError(
                    f"no broker answered for {end.transactional_id}: {e}", "NETWORK_EXCEPTION"
                ) from None
        time.sleep(min(1.0, 0.1 * attempt))
