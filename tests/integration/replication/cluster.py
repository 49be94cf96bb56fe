"""Three (or N) brokers replicating from static metadata, for the replication tests: the
harness is ``harness.cluster``."""

from harness.cluster import (
    CLUSTER_SECRET,
    StaticCluster,
    log_bytes,
    log_records,
    start_static_cluster,
    static_cluster_metadata,
)

__all__ = [
    "CLUSTER_SECRET",
    "StaticCluster",
    "log_bytes",
    "log_records",
    "start_static_cluster",
    "static_cluster_metadata",
]
