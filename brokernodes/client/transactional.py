"""The transactional producer: Kafka's transactions over Sluice's own API.

``AsyncTransactionalProducer`` is an idempotent ``AsyncProducer`` (acks=all) with a
``transactional_id``. ``init_transactions()`` asks the id's coordinator for the producer id
and a bumped epoch (``POST /sluice/v1/transactions/{id}/init``, any broker forwards it), which
fences every older instance. Within ``begin_transaction()`` ... ``commit_transaction()``:

- ``send`` queues records as the idempotent producer does; batches carry the transactional
  bit and the producer's sequence per partition. Before a partition's first batch of the
  transaction the sender adds the partition (``.../partitions``; the partitions waiting at
  the same moment go in one call), and every produce names the transactional id so the
  leader verifies the batch with the coordinator;
- ``send_offsets_to_transaction`` adds the group (``.../groups``) and writes the offsets to
  its coordinator (``.../offsets``): they become the group's only if the transaction commits;
- ``commit_transaction`` flushes, then ends the transaction (``.../end``), which answers once
  the markers are written; if a record of the transaction failed, it raises
  ``TransactionAbortableError`` and the application must ``abort_transaction()``;
- ``abort_transaction`` drops what is not sent yet, waits for what is, and aborts.

``ProducerFencedError`` (another instance took the id over, or the coordinator aborted a
transaction older than its timeout) is fatal: every later call raises it; close the producer.
``TransactionalProducer`` is the blocking version.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from brokernodes.client.accumulator import ProducerBatch
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientTimeoutError,
    SluiceError,
)

__all__ = [
    "AsyncTransactionalProducer",
    "ProducerFencedError",
    "TransactionAbortableError",
    "TransactionStateError",
    "TransactionalProducer",
]

log = logging.getLogger("brokernodes.client.transactional")

TXN_PATH = "/sluice/v1/transactions/"
FENCED_CODES = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
RETRIABLE_CODES = frozenset(
    {
        "CONCURRENT_TRANSACTIONS",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "LEADER_NOT_AVAILABLE",
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "NOT_ENOUGH_REPLICAS",
    }
)
RETRY_BACKOFF_MAX_S = 1.0


class ProducerFencedError(SluiceError):
    """Another producer with this transactional id has initialised since (or the
    coordinator aborted this producer's transaction on its timeout and bumped the epoch).
    Fatal: the producer refuses every later call; close it."""

    error_code = "PRODUCER_FENCED"


class TransactionAbortableError(SluiceError):
    """The transaction cannot commit (a record of it failed, or the coordinator refused):
    call ``abort_transaction()``, then start again."""

    error_code = "TRANSACTION_ABORTABLE"


class TransactionStateError(SluiceError):
    """A call out of order (``send`` outside a transaction, ``begin`` twice, ``commit``
    before ``init_transactions``...)."""

    error_code = "INVALID_TXN_STATE"


class AsyncTransactionalProducer(AsyncProducer):
    """See the module docstring. ``transaction_timeout_ms``: the coordinator aborts a
    transaction older than this (1 ms .. 15 min; Kafka's default 60 s)."""

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        transactional_id: str,
        transaction_timeout_ms: int = 60_000,
        **config: Any,
    ) -> None:
        if not isinstance(transactional_id, str) or not 0 < len(transactional_id) <= 249:
            raise ValueError("transactional_id: a string of 1..249 characters")
        if str(config.pop("acks", "all")).lower() not in ("all", "-1"):
            raise ValueError("a transactional producer writes with acks=all")
        if config.pop("enable_idempotence", True) is False:
            raise ValueError("a transactional producer is idempotent")
        super().__init__(url, api_key, acks="all", enable_idempotence=True, **config)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self._transactional = True
        self._produce_params = {"acks": "all", "transactional_id": transactional_id}
        if self._streams is not None:
            self._streams._params["transactional_id"] = transactional_id
        self._txn_base = TXN_PATH + quote(transactional_id, safe="")
        self._initialised = False
        self._in_txn = False
        self._fatal: ProducerFencedError | None = None
        self._txn_error: BaseException | None = None  # the first failure of this transaction
        self._added: set[tuple[str, int]] = set()  # partitions in the ongoing transaction
        self._has_offsets = False
        self._adding: dict[tuple[str, int], asyncio.Future] = {}
        self._to_add: list[tuple[str, int]] = []
        self._add_task: asyncio.Task | None = None

    # --- the coordinator ----------------------------------------------------------------

    async def _init_producer_id(self) -> None:
        """Not at start: ``init_transactions()`` gets the id from the coordinator."""

    async def _reset_producer_id(self, cause: BaseException) -> None:
        """A fatal sequence or epoch error on produce: for a transactional producer the
        transaction is lost (epoch errors: fenced); never a fresh idempotent id."""
        self._note_failure(cause)

    async def _txn_call(self, op: str, doc: dict[str, Any]) -> dict[str, Any]:
        """POST one coordinator operation, retrying what Kafka's producer retries until
        ``delivery_timeout_ms``; a fenced answer makes the producer unusable."""
        deadline = time.monotonic() + self.delivery_timeout_s
        attempt = 0
        urls = list(self._urls)
        while True:
            url = urls[attempt % len(urls)]
            attempt += 1
            try:
                response = await self._transport.request(
                    "POST", f"{url}{self._txn_base}/{op}", json=doc
                )
                return response.json()
            except (BrokerError, BrokerConnectionError, ClientTimeoutError) as exc:
                code = exc.error_code
                if code in FENCED_CODES:
                    raise self._fence(exc) from None
                status = getattr(exc, "status", None)
                retriable = code in RETRIABLE_CODES or (status is not None and status >= 500)
                if isinstance(exc, BrokerConnectionError | ClientTimeoutError):
                    retriable = True
                backoff = min(RETRY_BACKOFF_MAX_S, self.retry_backoff_s * 2 ** (attempt - 1))
                backoff *= random.uniform(0.8, 1.2)
                if not retriable or time.monotonic() + backoff > deadline:
                    raise
                log.info("transactional producer: %s: retrying after %s", op, exc)
                await asyncio.sleep(backoff)

    def _fence(self, cause: BaseException) -> ProducerFencedError:
        if self._fatal is None:
            self._fatal = ProducerFencedError(
                f"producer {self._producer_id} epoch {self._producer_epoch} of transactional "
                f"id {self.transactional_id!r} was fenced: another instance initialised it, "
                f"or its transaction timed out ({cause}); close this producer"
            )
        return self._fatal

    def _check(self, *, in_txn: bool | None = None, what: str = "") -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise TransactionStateError(f"{what}: the producer is closed")
        if not self._initialised:
            raise TransactionStateError(f"{what}: call init_transactions() first")
        if in_txn is True and not self._in_txn:
            raise TransactionStateError(f"{what}: no transaction; call begin_transaction()")
        if in_txn is False and self._in_txn:
            raise TransactionStateError(f"{what}: a transaction is already open")

    def _producer(self) -> dict[str, int]:
        return {"producer_id": self._producer_id, "producer_epoch": self._producer_epoch}

    # --- the transaction ----------------------------------------------------------------

    async def init_transactions(self) -> None:
        """Get the producer id and a new epoch (fencing older instances; a transaction they
        left open is aborted first). Call once, after ``start``."""
        if not self._started:
            await self.start()
        if self._fatal is not None:
            raise self._fatal
        doc = await self._txn_call("init", {"transaction_timeout_ms": self.transaction_timeout_ms})
        with self._lock:
            self._producer_id = int(doc["producer_id"])
            self._producer_epoch = int(doc["producer_epoch"])
            self._pid_generation += 1
            for state in self._topics.values():  # a new epoch starts every sequence at 0
                for queue in state.queues:
                    queue.producer_id = -1
        self._initialised = True

    def begin_transaction(self) -> None:
        self._check(in_txn=False, what="begin_transaction")
        self._in_txn = True
        self._txn_error = None
        self._added = set()
        self._has_offsets = False

    def send(self, topic: str, value: Any = None, key: Any = None, *args: Any, **kw: Any):
        if not self._in_txn or self._fatal is not None:
            self._check(in_txn=True, what="send")
        if self._txn_error is not None:
            raise TransactionAbortableError(
                f"the transaction cannot commit ({self._txn_error}); call abort_transaction()"
            )
        return super().send(topic, value, key, *args, **kw)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int] | Iterable[Any],
        group_id: str,
        *,
        member_id: str | None = None,
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> None:
        """Commit ``offsets`` (the next offsets to read: ``{(topic, partition): offset}``
        or items with ``topic``, ``partition`` and ``offset``) for ``group_id`` with the
        transaction."""
        self._check(in_txn=True, what="send_offsets_to_transaction")
        rows = offset_rows(offsets)
        if not rows:
            return
        try:
            await self._txn_call("groups", {**self._producer(), "group_id": group_id})
            self._has_offsets = True
            await self._txn_call(
                "offsets",
                {
                    **self._producer(),
                    "group_id": group_id,
                    "offsets": rows,
                    "member_id": member_id,
                    "generation_id": generation_id,
                    "group_instance_id": group_instance_id,
                },
            )
        except ProducerFencedError:
            raise
        except SluiceError as exc:
            self._note_failure(exc)
            raise TransactionAbortableError(
                f"the offsets could not join the transaction ({exc}); call abort_transaction()"
            ) from exc

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it (readable by
        read_committed consumers when this returns)."""
        self._check(in_txn=True, what="commit_transaction")
        await self.flush(timeout)
        if self._fatal is not None:
            raise self._fatal
        if self._txn_error is not None:
            raise TransactionAbortableError(
                f"a record of the transaction failed ({self._txn_error}); call abort_transaction()"
            ) from self._txn_error
        if self._added or self._has_offsets:
            try:
                await self._txn_call("end", {**self._producer(), "commit": True})
            except ProducerFencedError:
                raise
            except SluiceError as exc:
                self._note_failure(exc)
                raise TransactionAbortableError(
                    f"the commit was refused ({exc}); call abort_transaction()"
                ) from exc
        self._in_txn = False

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet, wait for those in flight, and abort: none of the
        transaction's records or offsets is ever read by a read_committed consumer."""
        self._check(in_txn=True, what="abort_transaction")
        self._drop_unsent()
        await self.flush(timeout)
        if self._fatal is not None:
            raise self._fatal
        if self._added or self._has_offsets:
            await self._txn_call("end", {**self._producer(), "commit": False})
        self._in_txn = False
        self._txn_error = None

    def _drop_unsent(self) -> None:
        aborted = TransactionAbortableError(
            "the transaction was aborted before the record was sent"
        )
        dropped: list[ProducerBatch] = []
        with self._lock:
            for queue in list(self._queues_with_data):
                if queue.open is not None:
                    dropped.append(queue.open)
                    queue.open = None
                dropped.extend(queue.sealed)
                queue.sealed.clear()
        if dropped:
            super()._complete_failed(dropped, aborted)

    def _note_failure(self, error: BaseException) -> None:
        code = getattr(error, "error_code", None)
        if code in FENCED_CODES:
            self._fence(error)
        if self._txn_error is None:
            self._txn_error = error

    def _complete_failed(self, batches: list[ProducerBatch], error: BaseException) -> None:
        self._note_failure(error)
        super()._complete_failed(batches, error)

    # --- adding partitions before their first batch -------------------------------------

    async def _start_request(self, queue, batches: list[ProducerBatch]) -> None:
        tp = (queue.topic, queue.partition)
        if tp in self._added:
            await super()._start_request(queue, batches)
            return
        self._spawn(self._add_then_start(queue, batches, tp))

    async def _add_then_start(self, queue, batches: list[ProducerBatch], tp) -> None:
        try:
            await self._ensure_added(tp)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            with self._request_ends(queue, batches, "adding"):
                self._complete_failed(batches, exc)
            return
        await super()._start_request(queue, batches)

    async def _ensure_added(self, tp: tuple[str, int]) -> None:
        future = self._adding.get(tp)
        if future is None:
            future = self._adding[tp] = asyncio.get_running_loop().create_future()
            self._to_add.append(tp)
            if self._add_task is None or self._add_task.done():
                self._add_task = asyncio.get_running_loop().create_task(self._add_rounds())
        await asyncio.shield(future)

    async def _add_rounds(self) -> None:
        """One AddPartitionsToTxn per round for every partition waiting at that moment."""
        await asyncio.sleep(0)  # the sender's other partitions of this wake-up join in
        while self._to_add:
            tps, self._to_add = self._to_add, []
            try:
                await self._txn_call(
                    "partitions",
                    {
                        **self._producer(),
                        "partitions": [{"topic": t, "partition": p} for t, p in tps],
                    },
                )
                error = None
            except BaseException as exc:  # handed to every waiter
                error = exc
            for tp in tps:
                future = self._adding.pop(tp)
                if error is None:
                    self._added.add(tp)
                    future.set_result(None)
                else:
                    future.set_exception(error)
                    future.exception()  # retrieved: each waiter raises it itself


def offset_rows(offsets: Mapping[Any, int] | Iterable[Any]) -> list[dict[str, Any]]:
    """``{(topic, partition): offset}``, or items with ``topic``, ``partition``, ``offset``
    attributes (a confluent-kafka or SDK ``TopicPartition`` with an offset) -> JSON rows."""
    rows = []
    if isinstance(offsets, Mapping):
        for key, offset in offsets.items():
            topic, partition = (key.topic, key.partition) if hasattr(key, "topic") else key
            rows.append({"topic": topic, "partition": int(partition), "offset": int(offset)})
    else:
        for item in offsets:
            rows.append(
                {
                    "topic": item.topic,
                    "partition": int(item.partition),
                    "offset": int(item.offset),
                }
            )
    return rows


class TransactionalProducer(Producer):
    """Blocking transactional producer: ``AsyncTransactionalProducer`` on a private event
    loop thread (``transactional_id=`` required). Each call blocks until done, at most
    ``timeout`` seconds (default ``max_block_ms``, as Kafka's producer bounds them), then
    raises ``ClientTimeoutError``."""

    _async_class = AsyncTransactionalProducer

    def _bounded(self, coro, timeout: float | None) -> Any:
        return self._thread.run(coro, self.max_block_s if timeout is None else timeout)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._bounded(self._producer.init_transactions(), timeout)

    def begin_transaction(self) -> None:
        self._bounded(_call(self._producer.begin_transaction), None)

    def send_offsets_to_transaction(
        self, offsets, group_id: str, timeout: float | None = None, **kw: Any
    ) -> None:
        self._bounded(self._producer.send_offsets_to_transaction(offsets, group_id, **kw), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._bounded(self._producer.commit_transaction(timeout), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._bounded(self._producer.abort_transaction(timeout), timeout)


async def _call(fn) -> Any:
    return fn()
