"""Three (or N) brokers replicating from static metadata: fixed leaders, one metadata file
per broker naming every broker, every partition replicated on all of them.

Static metadata has no controller: each leader commits its own partitions' ISR changes
(docs/replication.md), so shrink/expand, NOT_ENOUGH_REPLICAS and the HW rules run for real
while leaders never move. Brokers authenticate each other with ``SLUICE_CLUSTER_SECRET``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from brokernodes.records.batch import decode_batch
from brokernodes.records.header import LOG_OVERHEAD, peek_batch_size
from harness.broker import (
    API_KEY,
    CLUSTER_ID,
    KEY_ID,
    SECRET,
    BrokerLauncher,
    BrokerProcess,
    free_port,
)

CLUSTER_SECRET = "replication-test-cluster-secret"


def static_cluster_metadata(
    broker_id: int,
    ports: dict[int, int],
    topics: dict[str, tuple[int, dict[str, str]]],
    *,
    leaders: dict[str, list[int]] | None = None,
    url_for: Callable[[int, int], str | None] | None = None,
    kafka_ports: dict[int, int] | None = None,
) -> dict:
    """Metadata for ``broker_id``: every topic on every broker; leaders round-robin unless
    given. ``url_for(viewer, broker)`` may route a link through a proxy; ``kafka_ports``
    names each broker's Kafka listener."""
    ids = sorted(ports)
    leaders = leaders or {}
    doc_topics = []
    for name, (n, configs) in topics.items():
        lead = leaders.get(name) or [ids[i % len(ids)] for i in range(n)]
        replicas = [[lead[i], *[b for b in ids if b != lead[i]]] for i in range(n)]
        doc_topics.append(
            {
                "name": name,
                "topic_id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "partitions": n,
                "leaders": lead,
                "replicas": replicas,
                "isr": replicas,
                "configs": configs,
            }
        )
    return {
        "cluster_id": CLUSTER_ID,
        "broker_id": broker_id,
        "brokers": [
            {
                "id": b,
                "url": (url_for(broker_id, b) if url_for else None)
                or f"http://127.0.0.1:{ports[b]}",
                **({"kafka": f"127.0.0.1:{kafka_ports[b]}"} if kafka_ports else {}),
            }
            for b in ids
        ],
        "topics": doc_topics,
        "api_keys": [
            {
                "key_id": KEY_ID,
                "secret_sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
                "principal": "User:test",
            }
        ],
    }


@dataclass
class StaticCluster:
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.url for b in self.brokers.values())

    @property
    def kafka_bootstrap(self) -> str:
        """Every broker's Kafka listener, as ``bootstrap.servers``."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]


def start_static_cluster(
    launcher: BrokerLauncher,
    topics: dict[str, tuple[int, dict[str, str]]],
    *,
    n: int = 3,
    leaders: dict[str, list[int]] | None = None,
    lag_ms: int = 1500,
    extra_args: list[str] | None = None,
    ports: dict[int, int] | None = None,
    url_for: Callable[[int, int], str | None] | None = None,
    env: dict[str, str] | None = None,
    kafka: bool = False,
) -> StaticCluster:
    ports = ports or {b: free_port() for b in range(1, n + 1)}
    kafka_ports = {b: free_port() for b in ports} if kafka else None
    cluster = StaticCluster()
    env = {
        "SLUICE_CLUSTER_SECRET": CLUSTER_SECRET,
        "SLUICE_REPLICA_LAG_TIME_MAX_MS": str(lag_ms),
        "SLUICE_ACKS_ALL_TIMEOUT_MS": "5000",
        **(env or {}),
    }
    for b, port in ports.items():
        cluster.brokers[b] = launcher(
            metadata=static_cluster_metadata(
                b, ports, topics, leaders=leaders, url_for=url_for, kafka_ports=kafka_ports
            ),
            port=port,
            kafka=kafka_ports[b] if kafka_ports else False,
            env=env,
            name=f"broker{b}",
            extra_args=list(extra_args or []),
        )
    return cluster


def log_bytes(directory: Path) -> bytes:
    """Every whole batch of a partition directory's segment files, back to back, byte for
    byte (a torn tail ends the read): replicas of one log must hold the same bytes."""
    out = bytearray()
    for seg in sorted(directory.glob("*.log")):
        try:
            data = seg.read_bytes()
        except FileNotFoundError:
            continue
        pos = 0
        while pos < len(data):
            size = peek_batch_size(data, pos)
            if size is None or size < LOG_OVERHEAD or pos + size > len(data):
                break
            out += data[pos : pos + size]
            pos += size
    return bytes(out)


def log_records(directory: Path) -> list[tuple[int, int, bytes]]:
    """(offset, leader epoch, value) of every record in a partition directory's segment
    files, read raw (no recovery, no locks; a torn tail ends the read)."""
    out: list[tuple[int, int, bytes]] = []
    for seg in sorted(directory.glob("*.log")):
        try:
            data = seg.read_bytes()
        except FileNotFoundError:
            continue
        pos = 0
        while pos < len(data):
            size = peek_batch_size(data, pos)
            if size is None or size < LOG_OVERHEAD or pos + size > len(data):
                break
            try:
                batch = decode_batch(data, pos)
            except Exception:
                break
            epoch = batch.header.partition_leader_epoch
            out.extend((r.offset, epoch, r.value or b"") for r in batch.records)
            pos += size
    return out


__all__ = [
    "API_KEY",
    "CLUSTER_SECRET",
    "StaticCluster",
    "log_bytes",
    "log_records",
    "start_static_cluster",
]
