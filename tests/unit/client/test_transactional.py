"""The transactional producer's rules that need no broker: its settings, the order of its
calls, and the offsets it sends with a transaction."""

from __future__ import annotations

import asyncio
from collections import namedtuple

import pytest

from brokernodes.client.transactional import (
    AsyncTransactionalProducer,
    TransactionStateError,
    offset_rows,
)


def test_settings_a_transaction_cannot_do_without():
    with pytest.raises(ValueError, match="acks=all"):
        AsyncTransactionalProducer("http://127.0.0.1:1", transactional_id="t", acks=1)
    with pytest.raises(ValueError, match="idempotent"):
        AsyncTransactionalProducer(
            "http://127.0.0.1:1", transactional_id="t", enable_idempotence=False
        )
    for bad in ("", "x" * 250):
        with pytest.raises(ValueError, match="transactional_id"):
            AsyncTransactionalProducer("http://127.0.0.1:1", transactional_id=bad)


def test_calls_out_of_order_are_refused_before_any_io():
    async def main() -> None:
        p = AsyncTransactionalProducer("http://127.0.0.1:1", transactional_id="t-order")
        assert p._produce_params == {"acks": "all", "transactional_id": "t-order"}
        assert p._transactional and p.idempotent
        with pytest.raises(TransactionStateError, match="init_transactions"):
            p.begin_transaction()
        with pytest.raises(TransactionStateError, match="init_transactions"):
            p.send("topic", b"v")
        with pytest.raises(TransactionStateError, match="init_transactions"):
            await p.commit_transaction()
        p._initialised = True  # as init_transactions leaves it
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            await p.abort_transaction()
        p.begin_transaction()
        with pytest.raises(TransactionStateError, match="already open"):
            p.begin_transaction()
        await p._transport.close()

    asyncio.run(main())


def test_offsets_are_taken_as_a_mapping_or_as_topic_partitions():
    assert offset_rows({("in", 0): 5, ("in", 1): 7}) == [
        {"topic": "in", "partition": 0, "offset": 5},
        {"topic": "in", "partition": 1, "offset": 7},
    ]
    TP = namedtuple("TP", "topic partition offset")
    assert offset_rows([TP("in", 2, 9)]) == [{"topic": "in", "partition": 2, "offset": 9}]
    Key = namedtuple("Key", "topic partition")
    assert offset_rows({Key("in", 3): 1}) == [{"topic": "in", "partition": 3, "offset": 1}]
