"""Transactional batches on Sluice's own binary produce (HTTP and WebSocket): verified as the
Kafka produce path verifies them (KIP-890 part 1, ``TransactionCoordinator.verify``).

A body with a transactional batch must name its transactional id (the HTTP query's, the
stream's), which the caller may WRITE, and the partition must be in the producer's ongoing
transaction; otherwise the batch would open a transaction no coordinator knows of and hold
the partition's last stable offset back. A control batch is the coordinator's to write and is
always refused. Refusals carry Kafka's names as ``error_code``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from brokernodes.errors import InvalidRecordError, NotEnoughReplicasError, SluiceError
from brokernodes.records.header import ATTRIBUTES_AT, CONTROL_BIT, LENGTH_AT, TRANSACTIONAL_BIT
from brokernodes.server.auth import TransactionalIdAuthorizationFailedError
from brokernodes.transactions.state import TxnError

if TYPE_CHECKING:
    from brokernodes.server.transactions.coordinator import TransactionCoordinator

__all__ = ["TxnRefusedError", "refused", "transactional_header", "verify_produce"]

_LENGTH = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_PID = struct.Struct(">q")
_PID_AT = 43  # after attributes, last offset delta and the two timestamps
_EPOCH_AT = 51
COORDINATOR_UNREACHABLE = frozenset(
    {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"}
)


class TxnRefusedError(SluiceError):
    """A coordinator's refusal under Kafka's name (INVALID_TXN_STATE, PRODUCER_FENCED...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = code


def refused(e: TxnError) -> TxnRefusedError:
    return TxnRefusedError(e.code, e.message)


def transactional_header(buf) -> tuple[bool, bool, int, int]:
    """(any transactional batch, any control batch, producer id, epoch of the first
    transactional batch): a walk over the batch headers only. A malformed body answers what
    it found so far; the append's own validation refuses it."""
    pos, end = 0, len(buf)
    txn = control = False
    pid = epoch = -1
    while pos + ATTRIBUTES_AT + 2 <= end:
        (attributes,) = _SHORT.unpack_from(buf, pos + ATTRIBUTES_AT)
        control = control or bool(attributes & CONTROL_BIT)
        if attributes & TRANSACTIONAL_BIT and not txn and pos + _EPOCH_AT + 2 <= end:
            txn = True
            (pid,) = _PID.unpack_from(buf, pos + _PID_AT)
            (epoch,) = _SHORT.unpack_from(buf, pos + _EPOCH_AT)
        (length,) = _LENGTH.unpack_from(buf, pos + LENGTH_AT)
        if length <= 0:
            break
        pos += LENGTH_AT + 4 + length
    return txn, control, pid, epoch


async def verify_produce(
    coordinator: TransactionCoordinator,
    qualified: str | None,
    topic: str,
    partition: int,
    leader_epoch: int,
    buf,
    where: str,
) -> None:
    """Raise unless ``buf`` may be appended: no control batch, and every transactional batch
    belongs to ``qualified``'s ongoing transaction on ``topic-partition``. ``qualified`` is
    None when the request named no transactional id (its authorization is the caller's)."""
    txn, control, pid, epoch = transactional_header(buf)
    if control:
        raise InvalidRecordError(
            f"{where} takes no control batches: markers are written by the transaction "
            "coordinator only; nothing was appended"
        )
    if not txn:
        return
    if qualified is None:
        raise TransactionalIdAuthorizationFailedError(
            f"{where}: transactional batches need the request's transactional_id (the "
            "producer's, as given to init); nothing was appended"
        )
    try:
        answers = await coordinator.verify(
            qualified, pid, epoch, [(topic, partition)], leader_epoch
        )
        error = answers.get((topic, partition))
    except TxnError as e:
        error = e.code
    except SluiceError as e:
        error = e.error_code
    if error is None:
        return
    if error in COORDINATOR_UNREACHABLE:
        raise NotEnoughReplicasError(
            f"the transaction coordinator could not verify {topic}-{partition} ({error}); retry"
        )
    raise TxnRefusedError(
        error,
        f"{topic}-{partition} is not in producer {pid}'s ongoing transaction at epoch {epoch} "
        f"({error}); add the partition to the transaction first "
        "(POST /sluice/v1/transactions/{id}/partitions)",
    )
