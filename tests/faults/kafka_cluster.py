"""The fault cluster with a Kafka listener on every broker, for scenarios driven by Kafka
clients we did not write (librdkafka through confluent-kafka).

Same control plane, controller, three brokers and flush policy as ``FaultCluster``; each
broker also listens for Kafka's protocol on a port of its own, kept across restarts (a
restarted broker comes back at the address librdkafka already knows). Kafka clients reach
each listener through a ``ProduceTap`` (a ``LinkProxy`` counting the produced batches;
``kafka_net[b]``, the address the broker advertises in Metadata), so a scenario can lose
answers on the way back (``drop_rate``) and make librdkafka retry batches the broker
already wrote, and count the batches that reached a broker again (``resent``);
replication and the control plane's links are direct.
"""

from __future__ import annotations

import logging
import sys

from tests.faults.cluster import BROKER_IDS, FaultCluster
from tests.faults.kafka_tap import ProduceTap, resent_batches
from tests.integration.control_plane.conftest import ControlPlane, Proc, free_port
from tests.integration.kafka.cp_kafka import sasl

LOG = logging.getLogger("librdkafka")


class KafkaFaultCluster(FaultCluster):
    def __init__(self, cp: ControlPlane) -> None:
        super().__init__(cp, fsync=True, proxied=False)
        self.kafka_ports: dict[int, int] = {}
        self.kafka_net: dict[int, ProduceTap] = {}

    def _start_broker(self, broker_id: int) -> Proc:
        port = self.ports[broker_id] = free_port()
        kafka_port = self.kafka_ports[broker_id] = free_port()
        proxy = self.kafka_net[broker_id] = ProduceTap(kafka_port, seed=20 + broker_id).start()
        data = self.cp.workdir / f"broker-{broker_id}"
        argv = [
            sys.executable,
            "-m",
            "brokernodes",
            "--control-plane",
            self.cp.url,
            "--broker-id",
            str(broker_id),
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--kafka-port",
            str(kafka_port),
            "--kafka-advertised",
            f"127.0.0.1:{proxy.port}",
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
        b.kafka_port = kafka_port
        b.start()
        self.cp.brokers.append(b)  # stopped with the control plane
        b.wait_ready()
        return b

    def heal(self) -> None:
        for proxy in self.kafka_net.values():
            proxy.set_cut(False)
            proxy.blackhole = False
            proxy.drop_rate = 0.0
            proxy.latency_s = 0.0
        super().heal()

    def close_proxies(self) -> None:
        for proxy in self.kafka_net.values():
            proxy.close()
        super().close_proxies()

    def resent(self, topic: str) -> int:
        """Batches of ``topic`` that reached a broker again (same producer id, epoch,
        partition and sequence): retries the brokers had to deduplicate or place."""
        return resent_batches(self.kafka_net.values(), topic)

    @property
    def bootstrap(self) -> str:
        """Every broker's Kafka listener (through its proxy), as ``bootstrap.servers``."""
        return ",".join(f"127.0.0.1:{self.kafka_net[b].port}" for b in BROKER_IDS)

    def confluent(self, **extra) -> dict:
        """confluent-kafka settings: SASL/PLAIN with the tenant's API key."""
        user, secret = sasl(self.api_key)
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": secret,
            # librdkafka's log lines (every broker disconnect) to Python's logging, which
            # pytest captures, instead of stderr
            "logger": LOG,
            **extra,
        }


__all__ = ["KafkaFaultCluster"]
