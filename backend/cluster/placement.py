"""Partition placement across live brokers (pure): balance leaders, then replicas.

``place(brokers, count, replication_factor, load)`` returns ``count`` replica lists; the first
replica of each is its preferred leader. Greedy, like Kafka's rack-unaware assignment but
load-aware: each new partition's leader is the broker leading the fewest partitions (ties:
fewest replicas, then a rotating start so equal brokers take turns); its followers are the
brokers holding the fewest replicas. ``load`` counts what the cluster already holds, so topics
created one after another still spread evenly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class BrokerLoad:
    leaders: int = 0
    replicas: int = 0


@dataclass
class ClusterLoad:
    brokers: dict[int, BrokerLoad] = field(default_factory=dict)

    @classmethod
    def of(cls, assignments: Iterable[list[int]], brokers: Iterable[int]) -> ClusterLoad:
        """Load from existing replica lists (first = leader), counting only ``brokers``."""
        load = cls({b: BrokerLoad() for b in brokers})
        for replicas in assignments:
            for i, b in enumerate(replicas):
                if b in load.brokers:
                    load.brokers[b].replicas += 1
                    if i == 0:
                        load.brokers[b].leaders += 1
        return load


def place(
    brokers: Iterable[int],
    count: int,
    replication_factor: int,
    load: ClusterLoad | Mapping[int, BrokerLoad] | None = None,
) -> list[list[int]]:
    """Replica lists for ``count`` new partitions; ``[]`` each when no broker is live.

    The replication factor is capped by the number of brokers (the controller re-replicates
    when brokers join; issue 5)."""
    ids = sorted(set(brokers))
    if not ids or count <= 0:
        return [[] for _ in range(max(count, 0))]
    start = load.brokers if isinstance(load, ClusterLoad) else dict(load or {})
    zero = BrokerLoad()
    state = {b: BrokerLoad(start.get(b, zero).leaders, start.get(b, zero).replicas) for b in ids}
    rf = max(1, min(replication_factor, len(ids)))
    out: list[list[int]] = []
    for n in range(count):
        # rotate ties so brokers with equal load take turns
        order = ids[n % len(ids) :] + ids[: n % len(ids)]
        rank = {b: i for i, b in enumerate(order)}
        leader = min(ids, key=lambda b: (state[b].leaders, state[b].replicas, rank[b]))
        followers = sorted(
            (b for b in ids if b != leader), key=lambda b: (state[b].replicas, rank[b])
        )[: rf - 1]
        replicas = [leader, *followers]
        state[leader].leaders += 1
        for b in replicas:
            state[b].replicas += 1
        out.append(replicas)
    return out
