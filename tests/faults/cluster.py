"""A replicated cluster for fault scenarios: the control plane, one controller and three
brokers (tests/integration/control_plane/conftest.py), short sessions so failover is quick.

``FaultCluster`` adds what scenarios need on top: topics with RF 3 and min ISR 2, the
partition state from the metadata log, kill -9 / SIGSTOP / restart of brokers, healing
(every broker running again), and reading a replica's log straight from its segment files.

Brokers run with the default flush policy (no ``--no-fsync``) unless ``fsync=False``. With
``proxied=True`` every broker's links go through a ``LinkProxy`` each (``net[b]``: the
broker's advertised address, so its clients' and its followers' connections to it;
``control[b]``: its connection to the control plane, heartbeats and metadata), so a
scenario can cut, black-hole or slow either while the real controller elects.
"""

from __future__ import annotations

import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.faults.proxy import LinkProxy
from tests.integration.conftest import free_port
from tests.integration.control_plane.conftest import (
    FAST_FAILOVER_ENV,
    SECRET,
    ControlPlane,
    Proc,
    wait_for,
)
from tests.integration.replication.cluster import log_bytes, log_records

BROKER_IDS = (1, 2, 3)
FAULT_ENV = {
    **FAST_FAILOVER_ENV,
    "SLUICE_REPLICA_LAG_TIME_MAX_MS": "1500",
    "SLUICE_ACKS_ALL_TIMEOUT_MS": "4000",
    "SLUICE_REPLICA_FETCH_WAIT_MAX_MS": "200",
    # followers re-verify sealed segments often (the corruption scenario's repair)
    "SLUICE_SCRUB_INTERVAL_MS": "300",
}
# For scenarios that kill a group or transaction coordinator: the internal topics
# (__consumer_offsets, __transaction_state) wait for all three brokers. With the harness's
# 1 s grace a slow start made them on the first broker alone (RF 1), and killing that
# broker's coordinator left the groups no other. Three partitions each instead of twelve:
# every kill moves and re-replicates them all, and 27 replicated internal partitions made
# failovers on a loaded two-core machine outlast the scenarios' waits. The HTTP scenarios
# keep the short grace: they need no replicated internal topics.
COORDINATOR_FAULT_ENV = {
    **FAULT_ENV,
    "SLUICE_INTERNAL_TOPICS_GRACE_S": "60",
    "SLUICE_OFFSETS_TOPIC_PARTITIONS": "3",
    "SLUICE_TXN_STATE_TOPIC_PARTITIONS": "3",
}
SESSION_TIMEOUT_S = float(FAST_FAILOVER_ENV["SLUICE_BROKER_SESSION_TIMEOUT_S"])


@dataclass
class FaultTopic:
    name: str
    topic_id: str
    partitions: int


class FaultCluster:
    def __init__(self, cp: ControlPlane, *, fsync: bool = True, proxied: bool = False) -> None:
        self.cp = cp
        self.fsync = fsync
        self.proxied = proxied
        self.brokers: dict[int, Proc] = {}
        self.ports: dict[int, int] = {}
        self.net: dict[int, LinkProxy] = {}
        self.control: dict[int, LinkProxy] = {}
        self.paused: set[int] = set()
        tenant = cp.tenant("faults")
        self.api_key: str = tenant["api_key"]
        self.cluster_id = "sluice-local"

    def start(self) -> FaultCluster:
        self.cp.start_controller("c1")
        self.cp.wait_controller()
        for b in BROKER_IDS:
            self.brokers[b] = self._start_broker(b)
        return self

    def _start_broker(self, broker_id: int) -> Proc:
        """``cp.start_broker`` with the flush policy and the links this cluster asks for."""
        port = self.ports[broker_id] = free_port()
        control_url = self.cp.url
        advertised = f"http://127.0.0.1:{port}"
        if self.proxied:
            self.net[broker_id] = LinkProxy(port, seed=broker_id).start()
            self.control[broker_id] = LinkProxy(self.cp.port, seed=10 + broker_id).start()
            control_url = self.control[broker_id].url
            advertised = self.net[broker_id].url
        data = self.cp.workdir / f"broker-{broker_id}"
        argv = [
            sys.executable,
            "-m",
            "brokernodes",
            "--control-plane",
            control_url,
            "--broker-id",
            str(broker_id),
            "--port",
            str(port),
            "--advertised-url",
            advertised,
            "--data-dir",
            str(data),
            *([] if self.fsync else ["--no-fsync"]),
        ]
        b = Proc(
            f"broker {broker_id}",
            argv,
            self.cp.env,
            self.cp.workdir / f"broker-{broker_id}.log",
            f"http://127.0.0.1:{port}",
        )
        b.data_dir = data  # type: ignore[attr-defined]
        b.start()
        self.cp.brokers.append(b)  # stopped with the control plane
        b.wait_ready()
        return b

    def close_proxies(self) -> None:
        for proxy in [*self.net.values(), *self.control.values()]:
            proxy.close()

    @property
    def urls(self) -> list[str]:
        return [self.brokers[b].url for b in BROKER_IDS]

    # --- topics ------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, *, replication_factor: int = 3, **configs: str
    ) -> FaultTopic:
        body = {
            "name": name,
            "partitions": partitions,
            "replication_factor": replication_factor,
            "configs": {"min.insync.replicas": "2", **configs},
        }
        status, doc = self.cp.api("POST", "topics/", body, key=self.api_key)
        for _ in range(3):
            # a broker whose heartbeats lapsed for a session timeout on this loaded machine
            # (2 s here) is briefly not available, and the placement refuses RF 3 meanwhile
            if status == 201 or "replication_factor" not in doc.get("fields", {}):
                break
            self.wait_brokers_live()
            status, doc = self.cp.api("POST", "topics/", body, key=self.api_key)
        assert status == 201, doc
        topic = FaultTopic(name, doc["topic_id"], partitions)
        wait_for(
            f"{name} to have leaders",
            lambda: all(self.leader(topic, p) >= 0 for p in range(partitions)),
        )
        wait_for(
            f"{name} on every replica",
            lambda: all(
                self.partition_dir(b, topic, p).is_dir()
                for p in range(partitions)
                for b in self.state(topic, p).get("replicas", ())
            ),
        )
        return topic

    def set_config(self, topic: FaultTopic, **configs: str) -> None:
        status, doc = self.cp.api(
            "PATCH", f"topics/{topic.name}", {"configs": configs}, key=self.api_key
        )
        assert status == 200, doc

    def state(self, topic: FaultTopic, partition: int = 0) -> dict:
        record = self.cp.topic_record(topic.topic_id) or {}
        parts = {p["partition"]: p for p in record.get("partitions", [])}
        return parts.get(partition, {})

    def leader(self, topic: FaultTopic, partition: int = 0) -> int:
        return int(self.state(topic, partition).get("leader", -1))

    def wait_leader(
        self, topic: FaultTopic, partition: int = 0, *, not_in=(), timeout: float = 30.0
    ) -> int:
        def elected():
            leader = self.leader(topic, partition)
            return leader if leader >= 0 and leader not in not_in else None

        return wait_for(f"a leader for {topic.name}-{partition} not in {not_in}", elected, timeout)

    def wait_isr(self, topic: FaultTopic, size: int, partition: int = 0, timeout=30.0) -> None:
        wait_for(
            f"ISR of {topic.name}-{partition} at {size}",
            lambda: len(self.state(topic, partition).get("isr", ())) == size,
            timeout,
        )

    def wait_all_isr(self, topic: FaultTopic, size: int = 3, timeout=30.0) -> None:
        """Until every partition of ``topic`` has a leader and an ISR of ``size``."""

        def full():
            states = [self.state(topic, p) for p in range(topic.partitions)]
            return all(s.get("leader", -1) >= 0 and len(s.get("isr", ())) == size for s in states)

        wait_for(f"every partition of {topic.name} at ISR {size}", full, timeout)

    def preferred_election(self, topic: FaultTopic, partition: int = 0) -> list[dict]:
        status, body = self.cp.internal(
            "POST",
            "partitions/preferred-election",
            {"topic_id": topic.topic_id, "partition": partition},
        )
        assert status == 200, body
        return body["elected"]

    def metric(self, broker: int, name: str) -> float:
        """One value of a broker's ``/metrics`` (read with the cluster secret)."""
        req = urllib.request.Request(
            self.brokers[broker].url + "/metrics", headers={"Authorization": f"Cluster {SECRET}"}
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} not in the /metrics of broker {broker}")

    def replica_dirs(self, topic: FaultTopic) -> dict[int, dict[int, Path]]:
        """partition -> broker -> its directory, for every replica of every partition."""
        return {
            p: {b: self.partition_dir(b, topic, p) for b in self.state(topic, p)["replicas"]}
            for p in range(topic.partitions)
        }

    # --- faults ------------------------------------------------------------------------

    def kill(self, broker: int) -> None:
        self.brokers[broker].kill()

    def stop(self, broker: int) -> None:
        self.brokers[broker].stop()

    def pause(self, broker: int) -> None:
        self.brokers[broker].pause()
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        self.brokers[broker].resume()
        self.paused.discard(broker)

    def restart(self, broker: int) -> None:
        b = self.brokers[broker]
        if b.proc is not None and b.proc.poll() is None:
            return
        b.start()
        b.wait_ready()

    def running(self, broker: int) -> bool:
        b = self.brokers[broker]
        return b.proc is not None and b.proc.poll() is None

    def kill_all(self) -> None:
        """kill -9 of every broker at once (what the OOM killer does to one machine)."""
        for b in BROKER_IDS:
            proc = self.brokers[b].proc
            if proc is not None and proc.poll() is None:
                proc.kill()
        for b in BROKER_IDS:
            self.brokers[b].kill()  # reaps

    def heal(self) -> None:
        """Every broker running and unpaused, every link whole."""
        for proxy in [*self.net.values(), *self.control.values()]:
            proxy.set_cut(False)
            proxy.blackhole = False
            proxy.drop_rate = 0.0
            proxy.latency_s = 0.0
        for b in list(self.paused):
            self.resume(b)
        for b in BROKER_IDS:
            self.restart(b)
        self.wait_brokers_live()

    def wait_brokers_live(self, timeout: float = 30.0) -> None:
        """Until the control plane sees every broker live (heartbeating and unfenced): a
        broker resumed after a pause is fenced until it has caught up with the metadata
        that fenced it, and a scenario starting before then would find too few brokers to
        place its replicas on. A broker that stays fenced fails here with its log's tail."""
        seen: dict[int, dict] = {}

        def live() -> bool:
            status, doc = self.cp.internal("GET", "controller")
            if status != 200:
                return False
            seen.clear()
            seen.update({b["broker_id"]: b for b in doc["brokers"]})
            return all(seen.get(b, {}).get("live") for b in BROKER_IDS)

        try:
            wait_for("every broker live in the control plane", live, timeout)
        except AssertionError as e:
            down = [b for b in BROKER_IDS if not seen.get(b, {}).get("live")]
            tails = "\n".join(
                f"--- broker {b} (log tail) ---\n{self.brokers[b].output()[-2000:]}" for b in down
            )
            raise AssertionError(
                f"{e}; brokers as the control plane sees them: {seen}\n{tails}"
            ) from None

    def partition_dir(self, broker: int, topic: FaultTopic, partition: int = 0) -> Path:
        return self.brokers[broker].data_dir / f"{topic.topic_id}-{partition}"  # type: ignore[attr-defined]

    def wait_replicas_equal(self, topic: FaultTopic, partition: int = 0, timeout=30.0) -> int:
        """Until every replica holds the same records, byte for byte; returns how many."""

        def equal():
            logs = [log_records(self.partition_dir(b, topic, partition)) for b in BROKER_IDS]
            if not all(log == logs[0] for log in logs):
                return None
            raw = [log_bytes(self.partition_dir(b, topic, partition)) for b in BROKER_IDS]
            return len(logs[0]) if all(r == raw[0] for r in raw) else None

        return wait_for(f"replicas of {topic.name}-{partition} to converge", equal, timeout)


__all__ = [
    "BROKER_IDS",
    "FAULT_ENV",
    "SESSION_TIMEOUT_S",
    "FaultCluster",
    "FaultTopic",
    "log_records",
]
