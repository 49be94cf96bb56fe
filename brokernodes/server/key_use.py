"""Which API keys were used on this broker, for the control plane's "last used".

``Broker.authorize`` notes the key of every authorized request (one dict write); the
heartbeat drains the keys used since the last heartbeat and sends their ids. A key is sent
at most once per ``RESOLUTION_S`` (the control plane keeps "last used" to the minute), so a
busy key costs one id a minute, not one per heartbeat. Pure: the caller passes the time.
"""

from __future__ import annotations

import time

RESOLUTION_S = 60.0


class KeyUseLog:
    def __init__(self, resolution_s: float = RESOLUTION_S) -> None:
        self.resolution_s = resolution_s
        self._used: set[str] = set()
        self._sent: dict[str, float] = {}  # key id -> when it was last sent

    def note(self, key_id: str) -> None:
        if key_id:
            self._used.add(key_id)

    def drain(self, now: float | None = None) -> list[str]:
        """Key ids used and not sent since, whose last sending is a resolution ago; a key
        used again sooner is kept for the first heartbeat after its minute."""
        now = time.monotonic() if now is None else now
        due = sorted(k for k in self._used if now - self._sent.get(k, -1e18) >= self.resolution_s)
        self._used.difference_update(due)  # the others wait until their minute is over
        for k in due:
            self._sent[k] = now
        if len(self._sent) > 4 * len(due) + 1024:  # forget keys not sent for a while
            self._sent = {k: t for k, t in self._sent.items() if now - t < self.resolution_s}
        return due

    def restore(self, key_ids: list[str]) -> None:
        """The heartbeat that carried ``key_ids`` failed: send them with the next one."""
        for k in key_ids:
            self._sent.pop(k, None)
            self._used.add(k)
