"""Per-peer log rate limiting for the Kafka listener's connection-close lines.

A client with a wrong secret reconnects every ~50 ms (librdkafka's backoff), and a hostile
peer can open connections as fast as it likes: one INFO line per close would let one client
fill the broker's log and bury everyone else's. Each peer gets at most one line per
interval; the lines held back are counted into the next one it is allowed. Pure: the caller
passes the clock."""

from __future__ import annotations

from collections import OrderedDict

INTERVAL_S = 10.0
MAX_PEERS = 4096  # peers remembered; the oldest is forgotten first


class PeerLogLimit:
    def __init__(self, interval_s: float = INTERVAL_S, max_peers: int = MAX_PEERS) -> None:
        self.interval_s = interval_s
        self.max_peers = max_peers
        self._peers: OrderedDict[str | None, tuple[float, int]] = OrderedDict()

    def allow(self, peer: str | None, now: float) -> int | None:
        """None: hold this line back. Otherwise log it, saying how many were held back
        since the peer's last line (0 for none)."""
        last = self._peers.get(peer)
        if last is not None and now - last[0] < self.interval_s:
            self._peers[peer] = (last[0], last[1] + 1)
            return None
        held = last[1] if last is not None else 0
        self._peers[peer] = (now, 0)
        self._peers.move_to_end(peer)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        return held
