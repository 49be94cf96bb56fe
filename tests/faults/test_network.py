"""Network fault scenarios (issue 5, scenarios 11 and 12) through a loopback TCP proxy per
link, on three brokers with static metadata (fixed leader, broker 1; each broker's metadata
file routes chosen links through a proxy). Idempotent acks=all producer under steady load.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.faults.conftest import long_run
from tests.faults.history import History
from tests.faults.load import LoadProducer, Reader, drain
from tests.faults.proxy import LinkProxy
from tests.integration.conftest import API_KEY, BrokerLauncher, free_port
from tests.integration.control_plane.conftest import wait_for
from tests.integration.replication.cluster import log_records, start_static_cluster

PHASE_S = 3.0 if long_run() else 1.5
LAG_MS = 1500
TOPIC = "net"


@pytest.fixture
def proxies() -> Iterator[list[LinkProxy]]:
    made: list[LinkProxy] = []
    yield made
    for p in made:
        p.close()


def test_isolated_leader_stops_acknowledging(broker_factory: BrokerLauncher, proxies, report):
    """Scenario 11: the followers' links to the leader are cut, then black-holed (answers
    lost one way), then slowed: an isolated leader stops acknowledging within the lag
    timeout each time, and everything acknowledged survives."""
    ports = {b: free_port() for b in (1, 2, 3)}
    links = {v: LinkProxy(ports[1]).start() for v in (2, 3)}  # follower v -> leader 1
    proxies.extend(links.values())
    c = start_static_cluster(
        broker_factory,
        {TOPIC: (1, {"min.insync.replicas": "2"})},
        leaders={TOPIC: [1]},
        lag_ms=LAG_MS,
        ports=ports,
        url_for=lambda viewer, b: links[viewer].url if b == 1 and viewer in links else None,
    )
    urls = [c.broker(1).url]
    history = History("network-isolated-leader")
    load = LoadProducer(history, urls, API_KEY, TOPIC, rate=100, prefix="net").start()
    reader = Reader(history, urls, API_KEY, TOPIC, 1).start()
    late: dict[str, int] = {}
    for fault in ("cut", "blackhole"):
        time.sleep(PHASE_S)
        acked_before = len(history.acks)
        started = time.monotonic()
        for link in links.values():
            if fault == "cut":
                link.set_cut(True)
            else:
                link.blackhole = True
        time.sleep(LAG_MS / 1000 + PHASE_S)
        # records sent once the links were cut can never be committed while they stay cut; an
        # ack arriving in the window for a record sent before the cut may be one committed
        # before it and delivered late (a busy machine), so only these count
        window = history.acks_between(started + LAG_MS / 1000 + 0.5, time.monotonic())
        late[fault] = sum(1 for v in window if history.attempts.get(v, 0.0) >= started)
        healed = len(history.acks)
        for link in links.values():
            link.set_cut(False)
            link.blackhole = False
        # a black-holed fetch waits for its own timeout before the follower fetches again
        wait_for("acknowledgements to resume", lambda n=healed: len(history.acks) > n, 30)
        assert len(history.acks) >= acked_before
    # slow links: replication goes on, only later
    for link in links.values():
        link.latency_s = 0.03
    slow_start = time.monotonic()
    time.sleep(PHASE_S + 1)
    slow_acks = len(history.acks_between(slow_start, time.monotonic()))
    for link in links.values():
        link.latency_s = 0.0
    load.stop()
    reader.stop()
    drain(history, urls, API_KEY, TOPIC, 1)
    verdict = history.check()
    assert late == {"cut": 0, "blackhole": 0}, f"acknowledged while isolated: {late}"
    assert slow_acks > 0
    report(verdict, acks_while_isolated=late, acks_over_slow_links=slow_acks)


def test_dropped_acknowledgements_cause_retries_not_duplicates(
    broker_factory: BrokerLauncher, proxies, report
):
    """Scenario 12: a fifth of the leader's answers to clients are lost on the way back, so
    the producer retries batches the leader already has: zero duplicates, nothing lost."""
    ports = {b: free_port() for b in (1, 2, 3)}
    front = LinkProxy(ports[1], seed=12).start()  # clients -> leader
    proxies.append(front)
    c = start_static_cluster(
        broker_factory,
        {TOPIC: (1, {"min.insync.replicas": "2"})},
        leaders={TOPIC: [1]},
        lag_ms=LAG_MS,
        ports=ports,
        # broker 1 names itself through the proxy, so its clients use it; followers do not
        url_for=lambda viewer, b: front.url if viewer == 1 and b == 1 else None,
    )
    front.drop_rate = 0.2
    history = History("dropped-acks")
    load = LoadProducer(
        history, [front.url], API_KEY, TOPIC, rate=100, prefix="dup", request_timeout_ms=2000
    ).start()
    time.sleep(3 * PHASE_S)
    front.drop_rate = 0.0
    load.stop()
    drain(history, [c.broker(1).url], API_KEY, TOPIC, 1)
    verdict = history.check()
    assert front.dropped > 0
    assert verdict.acknowledged == verdict.attempted
    logs = [log_records(b.data_dir / f"{TOPIC}-0") for b in c.brokers.values()]
    report(verdict, answers_dropped=front.dropped, leader_records=len(logs[0]))
