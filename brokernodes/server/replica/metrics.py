"""Replication gauges on ``/metrics``, read at scrape time (Kafka's ReplicaManager metrics).

- ``sluice_under_replicated_partitions``: partitions led here whose ISR is smaller than
  their replica set;
- ``sluice_under_min_isr_partitions``: led here with the ISR under ``min.insync.replicas``
  (acks=all is refused);
- ``sluice_offline_partitions``: hosted here with no leader at all;
- ``sluice_isr_size`` / ``sluice_replicas`` per led partition;
- ``sluice_followed_partitions``: partitions this broker replicates from other leaders;
- ``sluice_corrupt_batches_found``: bad batches the follower scrubber found (``scrubber``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from brokernodes.server.replica.manager import ReplicaManager


class ReplicationCollector(Collector):
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    def collect(self):
        partitions = list(self.replicas.partitions.values())
        under = under_min = offline = followed = 0
        isr = GaugeMetricFamily(
            "sluice_isr_size",
            "In-sync replicas of a partition led here",
            labels=["topic", "partition"],
        )
        assigned = GaugeMetricFamily(
            "sluice_replicas", "Replicas of a partition led here", labels=["topic", "partition"]
        )
        for p in partitions:
            ls = p.leader_state
            if ls is not None:
                labels = [p.topic, str(p.partition)]
                isr.add_metric(labels, len(ls.isr))
                assigned.add_metric(labels, len(ls.replicas))
                under += ls.under_replicated
                under_min += ls.under_min_isr
            elif p.info.leader < 0:
                offline += 1
            elif p.follower is not None:
                followed += 1
        yield GaugeMetricFamily(
            "sluice_under_replicated_partitions",
            "Partitions led here with fewer in-sync replicas than replicas",
            value=under,
        )
        yield GaugeMetricFamily(
            "sluice_under_min_isr_partitions",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas",
            value=under_min,
        )
        yield GaugeMetricFamily(
            "sluice_offline_partitions", "Partitions hosted here without a leader", value=offline
        )
        yield GaugeMetricFamily(
            "sluice_followed_partitions",
            "Partitions this broker replicates from another leader",
            value=followed,
        )
        yield GaugeMetricFamily(
            "sluice_corrupt_batches_found",
            "Corrupt batches the follower scrubber found in sealed segments since start",
            value=self.replicas.corrupt_batches_found,
        )
        yield isr
        yield assigned
