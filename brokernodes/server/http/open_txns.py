"""A partition's transactions as ``GET /sluice/v1/metadata`` shows them (docs/transactions.md):
its last stable offset and each producer's open transaction, for the console's partitions
table, where a transaction left open is what holds read_committed readers back.

An open transaction is named by its producer id, the producer's epoch, its first offset and
when it started: the timestamp of its first batch (the producer's clock, as Kafka's batch
timestamps are). Producer state remembers a producer's last few batches only; when the first
is no longer among them, the oldest remembered one stands in, so the time shown open is a
lower bound.
"""

from __future__ import annotations

from brokernodes.storage.producer_state import ProducerStateManager


def open_transactions(state: ProducerStateManager) -> list[dict]:
    """Each open transaction of the partition, oldest first."""
    out = []
    for producer_id, first_offset in sorted(
        dict(state.ongoing_transactions).items(), key=lambda kv: kv[1]
    ):
        entry = state.last_entry(producer_id)
        batches = list(entry.batches) if entry is not None else []
        started = next((b.timestamp for b in batches if b.first_offset == first_offset), None)
        if started is None and batches:
            started = batches[0].timestamp
        out.append(
            {
                "producer_id": producer_id,
                "producer_epoch": entry.producer_epoch if entry is not None else -1,
                "first_offset": first_offset,
                "started_ms": started,
            }
        )
    return out


def transaction_state(partition) -> dict:
    """``last_stable_offset`` and ``open_transactions`` of a hosted ``Partition``."""
    return {
        "last_stable_offset": partition.last_stable_offset,
        "open_transactions": open_transactions(partition.producer_state),
    }


__all__ = ["open_transactions", "transaction_state"]
