"""The ``__transaction_state`` topic as the broker sees it: found by name like
``__consumer_offsets`` (an internal topic of the cluster's internal organisation under the
control plane, a plain topic in static metadata), and a transactional id lives in partition
``abs(java_hash(qualified id)) % partitions``, as Kafka places it."""

from __future__ import annotations

from brokernodes.server.coordinator.offsets_topic import partition_for
from brokernodes.server.metadata.cluster import ClusterMetadata, TopicInfo

TXN_TOPIC = "__transaction_state"

__all__ = ["TXN_TOPIC", "partition_for", "txn_topic"]


def txn_topic(image: ClusterMetadata) -> TopicInfo | None:
    """The ``__transaction_state`` topic of the global image, or None."""
    root = image.root or image
    topic = root.topics.get(TXN_TOPIC)
    if topic is not None:
        return topic
    for view in root.tenants.values():
        topic = view.topics.get(TXN_TOPIC)
        if topic is not None:
            return topic
    return None
