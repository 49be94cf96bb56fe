"""The fault cluster with a Kafka listener on every broker, for scenarios driven by Kafka
clients we did not write (librdkafka through confluent-kafka).

Same control plane, controller, three brokers and flush policy as ``FaultCluster``; each
broker also listens for Kafka's protocol on a port of its own, kept across restarts (a
restarted broker comes back at the address librdkafka already knows). Links are direct
(not proxied): these scenarios kill processes, they do not cut links.
"""

from __future__ import annotations

import sys

from tests.faults.cluster import BROKER_IDS, FaultCluster
from tests.integration.control_plane.conftest import ControlPlane, Proc, free_port
from tests.integration.kafka.cp_kafka import sasl


class KafkaFaultCluster(FaultCluster):
    def __init__(self, cp: ControlPlane) -> None:
        super().__init__(cp, fsync=True, proxied=False)
        self.kafka_ports: dict[int, int] = {}

    def _start_broker(self, broker_id: int) -> Proc:
        port = self.ports[broker_id] = free_port()
        kafka_port = self.kafka_ports[broker_id] = free_port()
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

    @property
    def bootstrap(self) -> str:
        """Every broker's Kafka listener, as ``bootstrap.servers``."""
        return ",".join(f"127.0.0.1:{self.kafka_ports[b]}" for b in BROKER_IDS)

    def confluent(self, **extra) -> dict:
        """confluent-kafka settings: SASL/PLAIN with the tenant's API key."""
        user, secret = sasl(self.api_key)
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": secret,
            **extra,
        }


__all__ = ["KafkaFaultCluster"]
