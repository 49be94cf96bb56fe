"""Kafka transactions, the coordinator's side: the pure state machine of one transactional id
(``state``) and its ``__transaction_state`` records (``records``). Sans-IO; the broker's shell
is ``brokernodes.server.transactions``. See docs/transactions.md."""

from brokernodes.transactions.records import decode_value, encode_key, encode_value, load
from brokernodes.transactions.state import (
    MAX_TIMEOUT_MS,
    TxnError,
    TxnMetadata,
    TxnState,
    add_partitions,
    begin_abort_on_timeout,
    complete,
    end_txn,
    init_producer_id,
)

__all__ = [
    "MAX_TIMEOUT_MS",
    "TxnError",
    "TxnMetadata",
    "TxnState",
    "add_partitions",
    "begin_abort_on_timeout",
    "complete",
    "decode_value",
    "encode_key",
    "encode_value",
    "end_txn",
    "init_producer_id",
    "load",
]
