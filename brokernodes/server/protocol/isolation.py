"""``isolation=read_committed`` on Sluice's own fetch routes: the query parameter, and what
is done with aborted transactions' batches.

A read_committed read stops at the partition's last stable offset (``Partition.read``). The
aborted transactions overlapping the range read come as ``(producer_id, first_offset,
last_offset)`` ranges (``last_offset`` is the ABORT marker's offset): a transactional data
batch of that producer whose base offset lies in the range belongs to the aborted
transaction.

- JSON answers (HTTP ``/records``, the WebSocket's json/text/base64 frames) leave those
  batches out on the broker (``aborted_skip`` for ``render_batches``).
- The WebSocket's binary frames hold the batches in memory already: ``drop_aborted`` cuts
  them out before sending.
- The binary HTTP fetch (``/batches``) stays zero-copy: it sends every batch below the LSO
  and names the aborted ranges in the ``Sluice-Aborted-Transactions`` header
  (``aborted_header``: ``pid:first:last`` comma-separated), and the SDK drops those batches,
  as Kafka's consumers do with Fetch's aborted transactions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from brokernodes.records.header import BatchHeader, iter_batches
from brokernodes.server.protocol.params import choice_param

__all__ = [
    "ABORTED_HEADER",
    "ISOLATION_LEVELS",
    "LSO_HEADER",
    "AbortedRange",
    "aborted_header",
    "aborted_skip",
    "drop_aborted",
    "read_committed_param",
    "stable_aborted",
]

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ABORTED_HEADER = "Sluice-Aborted-Transactions"
LSO_HEADER = "Sluice-Last-Stable-Offset"
AbortedRange = tuple[int, int, int]  # producer id, first offset, ABORT marker's offset


def read_committed_param(query: Mapping[str, str]) -> bool:
    """``isolation=read_uncommitted`` (default) or ``read_committed``; anything else is
    INVALID_REQUEST naming the two."""
    return choice_param(query, "isolation", ISOLATION_LEVELS, "read_uncommitted") == (
        "read_committed"
    )


def stable_aborted(partition, start_offset: int) -> tuple[int, list[AbortedRange]]:
    """A partition's last stable offset and the aborted transactions from ``start_offset``
    below it (read after the data: the LSO only grows, so they cover what was read)."""
    lso = partition.last_stable_offset
    aborted = partition.aborted_transactions(start_offset, lso)
    return lso, [(a.producer_id, a.first_offset, a.last_offset) for a in aborted]


def aborted_skip(aborted: Iterable[AbortedRange]) -> Callable[[BatchHeader], bool] | None:
    """A predicate telling the batches of the aborted transactions (None when there are
    none, so the common path pays nothing)."""
    by_producer: dict[int, list[tuple[int, int]]] = {}
    for producer_id, first, last in aborted:
        by_producer.setdefault(producer_id, []).append((first, last))
    if not by_producer:
        return None

    def skip(h: BatchHeader) -> bool:
        ranges = by_producer.get(h.producer_id)
        if ranges is None or not h.is_transactional or h.is_control:
            return False
        return any(first <= h.base_offset <= last for first, last in ranges)

    return skip


def drop_aborted(raw: bytes, aborted: Iterable[AbortedRange]) -> bytes:
    """``raw`` whole batches without those of the aborted transactions (``raw`` itself when
    none is there)."""
    skip = aborted_skip(aborted)
    if skip is None:
        return raw
    headers = list(iter_batches(raw, verify_crc=False))
    if not any(skip(h) for h in headers):
        return raw
    view = memoryview(raw)
    return b"".join(view[h.position : h.position + h.size] for h in headers if not skip(h))


def aborted_header(aborted: Iterable[AbortedRange]) -> str:
    """The ``Sluice-Aborted-Transactions`` value: ``pid:first:last`` comma-separated."""
    return ",".join(f"{pid}:{first}:{last}" for pid, first, last in aborted)
