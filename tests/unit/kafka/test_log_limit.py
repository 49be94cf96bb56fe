"""The Kafka listener's close lines are rate limited per peer."""

from __future__ import annotations

from brokernodes.server.kafka.log_limit import PeerLogLimit


def test_one_line_per_peer_per_interval_counting_the_rest():
    limit = PeerLogLimit(interval_s=10)
    assert limit.allow("10.0.0.1", 0.0) == 0
    assert [limit.allow("10.0.0.1", t) for t in (0.05, 0.1, 9.9)] == [None, None, None]
    assert limit.allow("10.0.0.2", 1.0) == 0  # another peer is not held back
    assert limit.allow("10.0.0.1", 10.0) == 3  # the next line says how many were held
    assert limit.allow("10.0.0.1", 10.5) is None


def test_the_peers_remembered_are_bounded():
    limit = PeerLogLimit(interval_s=10, max_peers=3)
    for i in range(10):
        assert limit.allow(f"p{i}", 0.0) == 0
    assert len(limit._peers) == 3
    assert limit.allow("p0", 0.1) == 0  # forgotten, so allowed again
