"""InitProducerId: producer ids unique per broker (broker id in the high bits, a persisted
counter below), handed out from blocks so a restart never reuses one.

Ids from ``CLIENT_CHOSEN_MIN`` up are never handed out (broker ids stay below 2**22): they
are for writers that derive their producer identity themselves, such as the Spark sink
(docs/analytics.md), so a retried task finds what its earlier attempt appended."""

from __future__ import annotations

import os

from brokernodes.storage.files import atomic_write

BLOCK_SIZE = 1000
COUNTER_BITS = 40
CLIENT_CHOSEN_MIN = 1 << 62  # and up: never allocated here (broker ids below 2**22)
FILENAME = "producer-id-block"


class ProducerIdManager:
    """Allocates producer ids; the next unused block start is persisted before use.

    Blocking file I/O once per ``BLOCK_SIZE`` ids (a few ms); call ``next_id`` from a thread
    or accept that rare pause.
    """

    def __init__(self, data_dir: str | os.PathLike[str], broker_id: int) -> None:
        if not 0 <= broker_id < CLIENT_CHOSEN_MIN >> COUNTER_BITS:
            raise ValueError(f"broker id {broker_id} does not fit a producer id")
        self.path = os.path.join(os.fspath(data_dir), FILENAME)
        self.broker_id = broker_id
        self._next = self._read()
        self._block_end = self._next  # nothing reserved yet

    def _read(self) -> int:
        try:
            with open(self.path) as f:
                return int(f.read().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError as e:
            raise ValueError(f"corrupt {self.path}: {e}") from e

    def needs_io(self) -> bool:
        return self._next >= self._block_end

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            if self._block_end >= 2**COUNTER_BITS:
                raise OverflowError("producer id space of this broker is exhausted")
            atomic_write(self.path, str(self._block_end).encode())
        counter = self._next
        self._next += 1
        return (self.broker_id << COUNTER_BITS) | counter
