"""Network fault scenarios on the real controller: every broker's links go through a
loopback proxy each (``FaultCluster(proxied=True)``): its advertised address (clients and
followers reach it there) and its control-plane connection. Topics of three partitions at
RF 3, min ISR 2; an idempotent acks=all producer under steady load.

A writer that talks to a broker's real port (past its proxy) plays a client with stale
metadata: it keeps sending acks=all writes to an isolated leader, and every write it sent
once the leader could no longer commit must go unacknowledged.
"""

from __future__ import annotations

import threading
import time

from tests.faults.cluster import BROKER_IDS, FAULT_ENV, FaultCluster, FaultTopic
from tests.faults.conftest import long_run
from tests.faults.history import History
from tests.faults.load import LoadProducer, Reader, drain, leader_urls, read_replicas
from tests.faults.test_failover import post
from tests.integration.control_plane.conftest import wait_for

PHASE_S = 3.0 if long_run() else 1.0
RATE = 200.0 if long_run() else 100.0
LAG_S = int(FAULT_ENV["SLUICE_REPLICA_LAG_TIME_MAX_MS"]) / 1000
SESSION_S = float(FAULT_ENV["SLUICE_BROKER_SESSION_TIMEOUT_S"])
ACKS_TIMEOUT_S = int(FAULT_ENV["SLUICE_ACKS_ALL_TIMEOUT_MS"]) / 1000


class StaleWriter:
    """Sends acks=all writes, one at a time, straight to one broker's real port for one
    partition, recording each in the history (producer ``name``)."""

    def __init__(
        self, cluster: FaultCluster, history: History, topic: FaultTopic, broker: int, tag: str
    ):
        self.history = history
        self.name = f"stale-{tag}-{broker}"
        self.url = (
            cluster.brokers[broker].url
            + f"/v3/clusters/{cluster.cluster_id}/topics/{topic.name}/records?acks=all"
        )
        self.api_key = cluster.api_key
        self.sent: list[tuple[str, float]] = []
        self.statuses: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> StaleWriter:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"{self.name}-{i}"
            self.history.attempt(value, self.name, i)
            self.sent.append((value, time.monotonic()))
            body = {"partition_id": 0, "value": {"type": "STRING", "data": value}}
            status, doc = post(self.url, body, self.api_key)
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                self.history.ack(value, int(doc["partition_id"]), int(doc["offset"]))
            else:
                self.history.fail(value, RuntimeError(f"HTTP {status}: {doc}"))
            i += 1
            self._stop.wait(0.1)

    def stop(self) -> None:
        """Send no more writes (the one in flight is still answered)."""
        self._stop.set()

    def join(self) -> None:
        """Wait for the write in flight to be answered (within the acks=all timeout)."""
        self._stop.set()
        self._thread.join(ACKS_TIMEOUT_S + 25)
        assert not self._thread.is_alive(), f"{self.name} did not stop"

    def acknowledged(self, sent_from: float, acked_before: float = float("inf")) -> list[str]:
        """Writes sent at or after ``sent_from`` and acknowledged before ``acked_before``."""
        acks = self.history.acks
        return [
            v
            for v, sent in self.sent
            if sent >= sent_from and acks.get(v, (0, 0, acked_before))[2] < acked_before
        ]


class Run:
    def __init__(self, cluster: FaultCluster, name: str) -> None:
        self.cluster = cluster
        self.topic = cluster.create_topic(name, 3)
        self.history = History(name)
        self.load = LoadProducer(
            self.history, cluster.urls, cluster.api_key, name, rate=RATE, prefix=name
        ).start()
        self.reader = Reader(self.history, cluster.urls, cluster.api_key, name, 3).start()

    def finish(self):
        self.cluster.heal()
        self.cluster.wait_all_isr(self.topic, 3, timeout=60)
        self.load.stop()
        self.reader.stop()
        drain(self.history, self.cluster.urls, self.cluster.api_key, self.topic.name, 3)
        read_replicas(self.history, self.cluster.replica_dirs(self.topic))
        return self.history.check()


def test_leader_cut_from_the_controller_is_fenced(cluster: FaultCluster, report):
    """Scenario 11: partition 0's leader loses its link to the control plane (heartbeats
    and metadata): the controller fences it when its session lapses and elects a new leader
    from the ISR. The isolated leader, which cannot hear of it, must stop acknowledging
    acks=all writes once the new leader has taken over (the new leader no longer fetches
    from it, and it cannot shrink the ISR without the controller); after the cut heals it
    follows, and nothing it acknowledged is lost."""
    run = Run(cluster, "net-controller-cut")
    time.sleep(PHASE_S)
    leader = cluster.wait_leader(run.topic)
    writer = StaleWriter(cluster, run.history, run.topic, leader, "fenced").start()
    time.sleep(PHASE_S / 2)
    run.history.fault(f"cut broker {leader} from the control plane")
    cluster.control[leader].set_cut(True)
    new = cluster.wait_leader(run.topic, not_in=(leader,), timeout=SESSION_S + 30)
    elected_at = time.monotonic()
    # the new leader has taken over once its own metadata names it (until then it may
    # still fetch from the old one as a follower, and a write it fetched is safe on it)
    own = cluster.brokers[new].url
    wait_for(
        f"broker {new} to act as leader",
        lambda: leader_urls([own], cluster.api_key, run.topic.name).get(0) == cluster.net[new].url,
        30,
    )
    took_over_at = time.monotonic()
    # the write in flight then is answered within the acks=all timeout; the next one is
    # sent after the margin below
    time.sleep(ACKS_TIMEOUT_S + 1.0)
    writer.stop()
    verdict = run.finish()
    writer.join()
    # a fetch the new leader sent just before it took over still counts for the records
    # below its offset: half a second of margin. A write sent later must never be
    # acknowledged, before or after the cut heals.
    late = writer.acknowledged(took_over_at + 0.5)
    acked_during = len(writer.acknowledged(elected_at - SESSION_S))
    assert not late, f"the fenced leader {leader} acknowledged {late[:10]}"
    assert verdict.acknowledged > 0
    report(
        verdict,
        new_leader=new,
        seconds_from_election_to_takeover=round(took_over_at - elected_at, 3),
        stale_writes=len(writer.sent),
        stale_statuses=writer.statuses,
        stale_acks_around_election=acked_during,
        acks_while_fenced=0,
    )


def test_isolated_leader_stops_acknowledging(cluster: FaultCluster, report):
    """Scenario 12: partition 0's leader's advertised link (its followers' and clients'
    way in) is cut, then black-holed (requests arrive, answers vanish), then slowed. It
    still reaches the controller, so it stays leader and shrinks the ISR below min ISR:
    writes sent to it once its followers are cut off are never acknowledged, and
    acknowledgements resume after healing. Shortened, only the black hole (the subtler:
    connections stay open)."""
    run = Run(cluster, "net-isolated-leader")
    leader = cluster.wait_leader(run.topic)
    link = cluster.net[leader]
    late: dict[str, int] = {}
    for fault in ("cut", "blackhole") if long_run() else ("blackhole",):
        time.sleep(PHASE_S)
        writer = StaleWriter(cluster, run.history, run.topic, leader, fault).start()
        run.history.fault(f"{fault} of broker {leader}'s link")
        started = time.monotonic()
        if fault == "cut":
            link.set_cut(True)
        else:
            link.blackhole = True
        time.sleep(LAG_S + PHASE_S)
        writer.stop()
        healed = len(run.history.acks)
        healed_at = time.monotonic()
        link.set_cut(False)
        link.blackhole = False
        writer.join()
        # a write sent once the link is down can never be committed while it stays down
        late[fault] = len(writer.acknowledged(started + 0.2, healed_at))
        wait_for("acknowledgements to resume", lambda n=healed: len(run.history.acks) > n, 60)
        cluster.wait_all_isr(run.topic, 3, timeout=60)
    for b in BROKER_IDS:
        cluster.net[b].latency_s = 0.03
    slow_start = time.monotonic()
    time.sleep(PHASE_S + 1)
    slow_acks = len(run.history.acks_between(slow_start, time.monotonic()))
    verdict = run.finish()
    assert late and not any(late.values()), f"acknowledged while isolated: {late}"
    assert slow_acks > 0
    report(verdict, acks_while_isolated=late, acks_over_slow_links=slow_acks)


def test_dropped_answers_cause_retries_not_duplicates(cluster: FaultCluster, report):
    """Scenario 13: a fifth of every broker's answers (to clients and to followers) are
    lost on the way back, so producers retry batches the leader already has and followers
    re-fetch: zero duplicates, nothing lost, every write answered."""
    run = Run(cluster, "net-dropped-answers")
    run.history.fault("a fifth of the answers dropped")
    for b in BROKER_IDS:
        cluster.net[b].drop_rate = 0.2
    time.sleep(3 * PHASE_S)
    dropped = sum(cluster.net[b].dropped for b in BROKER_IDS)
    verdict = run.finish()
    assert dropped > 0
    assert verdict.acknowledged == verdict.attempted, verdict.summary()
    report(verdict, answers_dropped=dropped)
