"""``GET /sluice/v1/broker``: what an operator asks of one broker: its version and uptime,
its log directory's disk (used by partition logs, free and total on the file system), the
partitions it hosts and leads (and the led ones it sees under-replicated), each tenant's
bytes in the partitions it leads, and the non-secret settings it runs with.

Operators only (``Authorization: Cluster <secret>``, as ``/metrics``): the answer names every
tenant. The control plane's console reads it and keeps what a tenant may see. A broker
without a cluster secret (static metadata: tests, benchmarks) answers anyone, as its
``/metrics`` does. The disk figures come from one ``statvfs`` and the logs' in-memory sizes,
so the call costs no directory walk.
"""

from __future__ import annotations

import hmac
import shutil
import time
from collections.abc import Iterable, Mapping
from importlib import metadata as package_metadata
from typing import TYPE_CHECKING, Any

from aiohttp import web

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol.request import SluiceRequest

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.config import BrokerConfig
    from brokernodes.server.metadata.cluster import ClusterMetadata

# The settings shown: how the broker behaves, never a secret, a key file or an internal URL.
SHOWN_CONFIGS = (
    "http_front",
    "fetch_path",
    "fsync",
    "max_request_bytes",
    "max_fetch_bytes",
    "max_wait_ms",
    "body_timeout_s",
    "request_head_timeout_s",
    "connections_max_idle_s",
    "flush_interval_s",
    "housekeeping_interval_s",
    "replica_lag_time_max_ms",
    "replica_fetch_wait_max_ms",
    "replica_fetch_max_bytes",
    "acks_all_timeout_s",
    "controlled_shutdown_timeout_s",
    "scrub_interval_s",
    "max_inflation_ratio",
)


def version() -> str:
    try:
        return package_metadata.version("sluice")
    except package_metadata.PackageNotFoundError:
        return "unknown"


VERSION = version()


def shown_configs(config: BrokerConfig) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(config, name) for name in SHOWN_CONFIGS}
    out["kafka_tls"] = bool(config.kafka_tls_cert)
    return out


def partition_counts(partitions: Iterable[Any]) -> dict[str, int]:
    """Hosted replicas, those it leads, and led ones whose ISR is short of the replicas."""
    hosted = leaders = under = 0
    for p in partitions:
        hosted += 1
        if p.is_leader:
            leaders += 1
            under += bool(p.under_replicated)
    return {"partitions": hosted, "leaders": leaders, "under_replicated": under}


def leader_bytes_by_tenant(root: ClusterMetadata, partitions: Mapping[tuple[str, int], Any]):
    """``{tenant: bytes}`` of the partition logs this broker leads, per tenant: summed over
    the brokers, a tenant's stored bytes once (followers' copies not counted again)."""
    out: dict[str, int] = {}
    for tenant, view in root.tenants.items():
        total = 0
        for topic in view.topics.values():
            for info in topic.partitions:
                p = partitions.get((info.log_key, info.partition))
                if p is not None and p.is_leader and p.log is not None:
                    total += p.log.size_in_bytes
        if total:
            out[tenant] = total
    return out


def log_dir(path: str, partitions: Iterable[Any]) -> dict[str, Any]:
    """One log directory: the bytes its partition logs hold, and the file system's free and
    total bytes (null when the file system cannot be read: the page says so, not 0)."""
    used = sum(p.log.size_in_bytes for p in partitions if p.log is not None)
    try:
        disk = shutil.disk_usage(path)
        total, free = disk.total, disk.free
    except OSError:
        total = free = None
    return {"path": path, "log_bytes": used, "free_bytes": free, "total_bytes": total}


def describe(broker: Broker) -> dict[str, Any]:
    parts = list(broker.replicas.partitions.values())
    root = broker.metadata.global_image()
    return {
        "broker_id": root.broker_id,
        "version": VERSION,
        "started_at_ms": int(broker.started_at * 1000),
        "uptime_s": round(time.time() - broker.started_at, 1),
        "log_dirs": [log_dir(broker.config.data_dir, parts)],
        **partition_counts(parts),
        "leader_bytes_by_tenant": leader_bytes_by_tenant(root, broker.replicas.partitions),
        "configs": shown_configs(broker.config),
    }


def add_routes(app: web.Application, broker: Broker) -> None:
    async def broker_info(request: SluiceRequest) -> web.Response:
        secret = broker.config.cluster_secret
        if secret and not hmac.compare_digest(
            (auth_header(request) or "").encode(), f"Cluster {secret}".encode()
        ):
            raise UnauthenticatedError(
                "/sluice/v1/broker is for operators: send Authorization: Cluster <secret>"
            )
        return json_response(describe(broker))

    app.router.add_get("/sluice/v1/broker", broker_info, name="broker_info")
