"""What the metadata answer says of a partition's open transactions
(``brokernodes.server.http.open_txns``): oldest first, each with its producer's epoch, its
first offset and its first batch's timestamp, or the oldest remembered batch's when the first
has been forgotten (a lower bound on how long it has been open)."""

from __future__ import annotations

from brokernodes.records.header import CONTROL_BIT, TRANSACTIONAL_BIT
from brokernodes.server.http.open_txns import open_transactions
from brokernodes.storage.producer_state import ProducerStateManager
from tests.unit.storage.test_producer_state import header


def test_open_transactions_oldest_first_with_their_start():
    state = ProducerStateManager()
    state.update(header(7, 0, 0, 1, 0, timestamp=100))  # idempotent only: no transaction
    state.update(header(8, 3, 0, 2, 1, timestamp=200, attributes=TRANSACTIONAL_BIT))
    state.update(header(9, 1, 0, 1, 3, timestamp=150, attributes=TRANSACTIONAL_BIT))
    state.update(header(8, 3, 2, 1, 4, timestamp=400, attributes=TRANSACTIONAL_BIT))
    assert open_transactions(state) == [
        {"producer_id": 8, "producer_epoch": 3, "first_offset": 1, "started_ms": 200},
        {"producer_id": 9, "producer_epoch": 1, "first_offset": 3, "started_ms": 150},
    ]
    # producer 9's marker ends its transaction: only 8's is left
    marker = header(9, 1, -1, 1, 5, attributes=TRANSACTIONAL_BIT | CONTROL_BIT)
    state.update(marker, commit=True)
    assert [t["producer_id"] for t in open_transactions(state)] == [8]


def test_a_forgotten_first_batch_gives_a_lower_bound():
    state = ProducerStateManager()
    for i in range(8):  # more batches than producer state remembers
        state.update(header(5, 0, i, 1, i, timestamp=1_000 + i, attributes=TRANSACTIONAL_BIT))
    [txn] = open_transactions(state)
    assert txn["first_offset"] == 0
    assert 1_000 < txn["started_ms"] <= 1_007  # the oldest remembered batch's
    assert open_transactions(ProducerStateManager()) == []
