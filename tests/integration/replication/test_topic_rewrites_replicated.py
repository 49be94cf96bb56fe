"""A LogAppendTime, zstd topic replicated to three real brokers: the leader stamps and
recompresses once, and every follower's segment file holds the leader's bytes unchanged."""

from __future__ import annotations

from brokernodes.records.compression import Compression
from brokernodes.records.header import iter_batches
from tests.integration.broker.util import batch, produce_binary
from tests.integration.conftest import BrokerLauncher
from tests.integration.control_plane.conftest import wait_for
from tests.integration.replication.cluster import start_static_cluster

TOPIC = "stamped"
CONFIGS = {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"}


def segment(b) -> bytes:
    return (b.data_dir / f"{TOPIC}-0" / f"{0:020d}.log").read_bytes()


def test_followers_copy_the_stamped_recompressed_batches(broker_factory: BrokerLauncher):
    c = start_static_cluster(broker_factory, {TOPIC: (1, CONFIGS)}, leaders={TOPIC: [1]})
    times = []
    for i in range(5):
        status, answer = produce_binary(
            c.broker(1), TOPIC, 0, batch([b"v%d" % i * 50] * 3, ts=1_000), acks="all"
        )
        assert status == 200, answer
        times.append(answer["log_append_time"])
    leader_bytes = segment(c.broker(1))
    headers = list(iter_batches(leader_bytes))
    assert [h.max_timestamp for h in headers] == times
    assert all(h.timestamp_type == 1 and h.compression == Compression.ZSTD for h in headers)

    def replicated():
        return all(segment(b) == leader_bytes for b in c.brokers.values())

    wait_for("followers to hold the leader's bytes", replicated)
