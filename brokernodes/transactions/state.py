"""One transactional id's transaction, as Kafka's coordinator keeps it (KIP-98).

A ``TxnMetadata`` is immutable; every request is a function from the current metadata to the
next one (or a ``TxnError`` carrying Kafka's error name), so the shell only persists what a
function returns and answers. The states and their moves:

- ``EMPTY`` -> ``ONGOING`` when the first partition or group is added;
- ``ONGOING`` -> ``PREPARE_COMMIT`` / ``PREPARE_ABORT`` on EndTxn (or ``PREPARE_ABORT`` with
  the epoch bumped when the transaction times out or a new producer instance initialises);
- ``PREPARE_*`` -> ``COMPLETE_*`` once every partition has its marker; a complete state
  accepts a new transaction as ``EMPTY`` does.
- ``DEAD``: Kafka's name for an expired id; Sluice forgets an id idle for
  ``transactional.id.expiration.ms`` (``TxnMetadata.idle``) with a tombstone instead.

Fencing: InitProducerId bumps the epoch, so requests and batches of the previous instance
(a zombie) carry an older epoch and are refused (PRODUCER_FENCED). When the epoch would
overflow, a new producer id starts at epoch 0.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

MAX_EPOCH = 32767
MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms (Kafka's default: 15 minutes)
ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms (Kafka's default)
NO_PRODUCER_ID = -1
NO_EPOCH = -1

TopicPartitionKey = tuple[str, int]  # (topic name as the tenant knows it, partition)


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def open_for_new(self) -> bool:
        """A new transaction may start (nothing is in flight)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class TxnError(Exception):
    """A refused request: ``code`` is Kafka's error name (``INVALID_TXN_STATE``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str  # qualified: ``<tenant>/<id>`` with the control plane
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartitionKey] = frozenset()
    start_ms: int = -1  # when the ongoing transaction began (-1: none)
    last_update_ms: int = -1

    def expired(self, now_ms: int) -> bool:
        return self.state is TxnState.ONGOING and now_ms > self.start_ms + self.timeout_ms

    def idle(self, now_ms: int, expiration_ms: int = ID_EXPIRATION_MS) -> bool:
        """No transaction in flight and no request for ``expiration_ms``: the id may be
        forgotten (Kafka's ``transactional.id.expiration.ms``); its next InitProducerId
        starts afresh with a new producer id."""
        return self.state.open_for_new and now_ms - self.last_update_ms > expiration_ms


def validate_timeout(timeout_ms: int) -> int:
    if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
        raise TxnError(
            "INVALID_TRANSACTION_TIMEOUT",
            f"transaction.timeout.ms must be 1..{MAX_TIMEOUT_MS}, got {timeout_ms}",
        )
    return timeout_ms


def check_producer(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> TxnMetadata:
    """The caller is the current producer instance of this transactional id."""
    if meta is None or meta.producer_id != producer_id:
        raise TxnError(
            "INVALID_PRODUCER_ID_MAPPING",
            f"producer id {producer_id} is not the one of this transactional id; call "
            "init_transactions first",
        )
    if producer_epoch != meta.producer_epoch:
        raise TxnError(
            "PRODUCER_FENCED",
            f"producer epoch {producer_epoch} is not the current epoch {meta.producer_epoch}: "
            "another producer instance with this transactional.id has taken over",
        )
    return meta


def init_producer_id(
    meta: TxnMetadata | None,
    *,
    transactional_id: str,
    timeout_ms: int,
    expected_producer_id: int,
    expected_epoch: int,
    new_producer_id,
    now_ms: int,
) -> TxnMetadata:
    """InitProducerId with a transactional id: a new id at epoch 0, or the same id at the next
    epoch. An ongoing transaction of the previous instance is first aborted: the answer is
    ``PREPARE_ABORT`` at the bumped epoch, which the shell completes and the client retries
    (CONCURRENT_TRANSACTIONS) until it finds the abort complete. ``expected_*`` (KIP-360,
    -1 when absent) must name the current (or, after a bump the client missed, previous)
    instance."""
    validate_timeout(timeout_ms)
    if meta is None or meta.state is TxnState.DEAD:
        return TxnMetadata(
            transactional_id, new_producer_id(), 0, timeout_ms, last_update_ms=now_ms
        )
    if meta.state.preparing:
        raise TxnError(
            "CONCURRENT_TRANSACTIONS",
            "the previous transaction of this transactional id is still completing; retry",
        )
    if expected_producer_id != NO_PRODUCER_ID and (
        expected_producer_id != meta.producer_id
        or expected_epoch
        not in (
            meta.producer_epoch,
            meta.producer_epoch - 1,
        )
    ):
        raise TxnError(
            "PRODUCER_FENCED",
            f"producer {expected_producer_id} epoch {expected_epoch} is no longer the current "
            "instance of this transactional id",
        )
    if meta.state is TxnState.ONGOING:
        return replace(
            _bumped(meta, new_producer_id),
            state=TxnState.PREPARE_ABORT,
            last_update_ms=now_ms,
        )
    return replace(
        _bumped(meta, new_producer_id),
        timeout_ms=timeout_ms,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        start_ms=-1,
        last_update_ms=now_ms,
    )


def _bumped(meta: TxnMetadata, new_producer_id) -> TxnMetadata:
    if meta.producer_epoch + 1 >= MAX_EPOCH:
        return replace(meta, producer_id=new_producer_id(), producer_epoch=0)
    return replace(meta, producer_epoch=meta.producer_epoch + 1)


def add_partitions(
    meta: TxnMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: frozenset[TopicPartitionKey],
    now_ms: int,
) -> TxnMetadata:
    """AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the group's
    ``__consumer_offsets`` one): the transaction is ongoing and holds ``partitions``."""
    meta = check_producer(meta, producer_id, producer_epoch)
    if meta.state.preparing:
        raise TxnError(
            "CONCURRENT_TRANSACTIONS",
            "the previous transaction is still completing; retry shortly",
        )
    if meta.state is TxnState.DEAD:
        raise TxnError("INVALID_TXN_STATE", "this transactional id has expired")
    if meta.state is TxnState.ONGOING:
        if partitions <= meta.partitions:
            return meta
        return replace(meta, partitions=meta.partitions | partitions, last_update_ms=now_ms)
    return replace(
        meta,
        state=TxnState.ONGOING,
        partitions=frozenset(partitions),
        start_ms=now_ms,
        last_update_ms=now_ms,
    )


def end_txn(
    meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
) -> TxnMetadata:
    """EndTxn: ``ONGOING`` moves to ``PREPARE_COMMIT``/``PREPARE_ABORT``. A retry of an end
    already done answers the same metadata (the shell then answers success, or
    CONCURRENT_TRANSACTIONS while the markers are still being written)."""
    meta = check_producer(meta, producer_id, producer_epoch)
    want = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if meta.state is TxnState.ONGOING:
        return replace(meta, state=want, last_update_ms=now_ms)
    if meta.state in (want, done):
        return meta
    if meta.state is TxnState.EMPTY and not commit:
        return meta  # nothing was added: aborting nothing is done already
    verb = "commit" if commit else "abort"
    raise TxnError(
        "INVALID_TXN_STATE",
        f"cannot {verb} a transaction in state {meta.state.value}"
        + (": it was aborted (it timed out, or a new instance took over)" if commit else ""),
    )


def complete(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: ``PREPARE_X`` -> ``COMPLETE_X``, the partitions forgotten."""
    if not meta.state.preparing:
        raise TxnError("INVALID_TXN_STATE", f"nothing to complete in state {meta.state.value}")
    state = (
        TxnState.COMPLETE_COMMIT
        if meta.state is TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    return replace(meta, state=state, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)


def begin_abort_on_timeout(meta: TxnMetadata, now_ms: int, new_producer_id) -> TxnMetadata:
    """transaction.timeout.ms passed while ``ONGOING``: abort with the epoch bumped, so the
    stuck producer is fenced and cannot add to or commit what is being aborted."""
    if not meta.expired(now_ms):
        raise TxnError("INVALID_TXN_STATE", "the transaction has not timed out")
    bumped = _bumped(meta, new_producer_id)
    return replace(bumped, state=TxnState.PREPARE_ABORT, last_update_ms=now_ms)
