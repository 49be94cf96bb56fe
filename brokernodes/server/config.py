"""``BrokerConfig``: the broker process's settings (command line and ``SLUICE_*`` env)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from brokernodes.records.compression import INFLATION_RATIO

FETCH_PATHS = ("sendfile", "copy")
LOOPS = ("uvloop", "asyncio")
HTTP_FRONTS = ("fast", "aiohttp")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    metadata_path: str
    data_dir: str
    port: int
    host: str = "127.0.0.1"
    loop: str = "uvloop"
    http_front: str = "fast"  # "aiohttp": no lean produce front (brokernodes.server.http.fast)
    fetch_path: str = "sendfile"  # or "copy": read + write, for the CPU-per-GiB comparison
    fsync: bool = True  # False: never fsync (benchmarks/tests only; durability is gone)
    max_request_bytes: int = 16 * 1024 * 1024
    body_timeout_s: float = 30.0  # a whole request body must arrive within this
    # connection limits (brokernodes.server.http.connection_limits; docs/data-plane-api.md)
    request_head_timeout_s: float = 20.0  # a whole request head, from its first byte
    connections_max_idle_s: float = 600.0  # Kafka's connections.max.idle.ms
    max_unauthenticated_connections: int = 0  # 0: derived from the open-file limit
    max_unauthenticated_connections_per_ip: int = 0  # 0: derived from the open-file limit
    max_fetch_bytes: int = 64 * 1024 * 1024
    max_wait_ms: int = 30_000  # upper bound for a fetch's max_wait_ms
    flush_interval_s: float = 1.0  # the flush.ms ticker
    housekeeping_interval_s: float = 30.0  # retention and compaction passes
    shutdown_timeout_s: float = 5.0  # in-flight requests get this long on SIGTERM
    log_level: str = "INFO"
    # the control plane's metadata log instead of the static file (metadata.client)
    control_plane_url: str | None = None
    broker_id: int | None = None
    advertised_url: str | None = None  # how clients and other brokers reach this broker
    cluster_secret: str = ""  # broker-to-broker and broker-to-control-plane credential
    # replication (docs/replication.md); Kafka's names
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1024 * 1024
    acks_all_timeout_s: float = 30.0  # an acks=all produce waits at most this for the ISR
    controlled_shutdown_timeout_s: float = 30.0
    scrub_interval_s: float = 3600.0  # followers re-verify sealed segments (0: never)
    # a compressed batch's records may inflate to this many times its topic's
    # max.message.bytes (brokernodes.records.compression; docs/records.md)
    max_inflation_ratio: int = INFLATION_RATIO
    # the Kafka protocol listener (docs/kafka-protocol.md): None = off
    kafka_port: int | None = None
    kafka_advertised: str | None = None  # "host:port" clients are told; default host:kafka_port
    kafka_tls_cert: str | None = None  # PEM certificate chain: the listener speaks SASL_SSL
    kafka_tls_key: str | None = None


def parse_args(argv: list[str] | None = None) -> BrokerConfig:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="python -m brokernodes", description="Run one Sluice broker node."
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="static metadata JSON file (tests, benchmarks)")
    source.add_argument(
        "--control-plane",
        metavar="URL",
        help="pull metadata from the control plane at URL (needs --broker-id and "
        "SLUICE_CLUSTER_SECRET)",
    )
    p.add_argument("--broker-id", type=int, default=None)
    p.add_argument("--advertised-url", default=None, help="default http://HOST:PORT (the listener)")
    p.add_argument("--data-dir", required=True, help="directory holding the partition logs")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--loop", choices=LOOPS, default=env("SLUICE_LOOP", "uvloop"))
    p.add_argument("--http-front", choices=HTTP_FRONTS, default=env("SLUICE_HTTP_FRONT", "fast"))
    p.add_argument(
        "--fetch-path", choices=FETCH_PATHS, default=env("SLUICE_FETCH_PATH", "sendfile")
    )
    p.add_argument("--no-fsync", action="store_true", default=env("SLUICE_NO_FSYNC") == "1")
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=int(env("SLUICE_MAX_REQUEST_BYTES", 16 * 1024 * 1024)),
    )
    p.add_argument(
        "--body-timeout-ms", type=int, default=int(env("SLUICE_BODY_TIMEOUT_MS", 30_000))
    )
    p.add_argument(
        "--request-head-timeout-ms",
        type=int,
        default=int(env("SLUICE_REQUEST_HEAD_TIMEOUT_MS", 20_000)),
        help="a request head must arrive whole within this of its first byte",
    )
    p.add_argument(
        "--connections-max-idle-ms",
        type=int,
        default=int(env("SLUICE_CONNECTIONS_MAX_IDLE_MS", 600_000)),
        help="close a connection that sends no request for this long (Kafka's default)",
    )
    p.add_argument(
        "--max-unauthenticated-connections",
        type=int,
        default=int(env("SLUICE_MAX_UNAUTHENTICATED_CONNECTIONS", 0)),
        help="cap on connections not yet authenticated (0: from the open-file limit and memory)",
    )
    p.add_argument(
        "--max-unauthenticated-connections-per-ip",
        type=int,
        default=int(env("SLUICE_MAX_UNAUTHENTICATED_CONNECTIONS_PER_IP", 0)),
        help="the same cap per client address (0: derived from the open-file limit)",
    )
    p.add_argument(
        "--housekeeping-interval-ms",
        type=int,
        default=int(env("SLUICE_HOUSEKEEPING_INTERVAL_MS", 30_000)),
    )
    p.add_argument("--log-level", default=env("SLUICE_LOG_LEVEL", "INFO"))
    p.add_argument(
        "--replica-lag-time-max-ms",
        type=int,
        default=int(env("SLUICE_REPLICA_LAG_TIME_MAX_MS", 30_000)),
        help="a follower not caught up for this long leaves the ISR (Kafka's default)",
    )
    p.add_argument(
        "--replica-fetch-wait-max-ms",
        type=int,
        default=int(env("SLUICE_REPLICA_FETCH_WAIT_MAX_MS", 500)),
    )
    p.add_argument(
        "--scrub-interval-ms",
        type=int,
        default=int(env("SLUICE_SCRUB_INTERVAL_MS", 3_600_000)),
        help="how often followers re-verify the CRCs of their sealed segments (0: never)",
    )
    p.add_argument(
        "--acks-all-timeout-ms",
        type=int,
        default=int(env("SLUICE_ACKS_ALL_TIMEOUT_MS", 30_000)),
        help="how long an acks=all produce waits for the in-sync replicas",
    )
    p.add_argument(
        "--max-inflation-ratio",
        type=int,
        default=int(env("SLUICE_MAX_INFLATION_RATIO", INFLATION_RATIO)),
        help="a compressed batch may inflate to at most this many times max.message.bytes",
    )
    p.add_argument(
        "--kafka-port",
        type=int,
        default=int(env("SLUICE_KAFKA_PORT", 0)) or None,
        help="listen for Kafka's binary protocol (SASL/PLAIN with API keys) on this port",
    )
    p.add_argument(
        "--kafka-advertised",
        default=env("SLUICE_KAFKA_ADVERTISED"),
        metavar="HOST:PORT",
        help="the Kafka address clients are given in Metadata (default HOST:KAFKA_PORT)",
    )
    p.add_argument("--kafka-tls-cert", default=env("SLUICE_KAFKA_TLS_CERT"), metavar="PEM")
    p.add_argument("--kafka-tls-key", default=env("SLUICE_KAFKA_TLS_KEY"), metavar="PEM")
    a = p.parse_args(argv)
    if bool(a.kafka_tls_cert) != bool(a.kafka_tls_key):
        p.error("--kafka-tls-cert and --kafka-tls-key go together")
    if a.kafka_tls_cert and not a.kafka_port:
        p.error("--kafka-tls-cert is for the Kafka listener: give --kafka-port too")
    for pem in (a.kafka_tls_cert, a.kafka_tls_key):
        if pem and not os.path.isfile(pem):
            p.error(f"no such certificate or key file: {pem}")
    for flag in (
        "body_timeout_ms",
        "request_head_timeout_ms",
        "connections_max_idle_ms",
        "max_inflation_ratio",
    ):
        if getattr(a, flag) <= 0:
            p.error(f"--{flag.replace('_', '-')} must be > 0")
    for flag in ("max_unauthenticated_connections", "max_unauthenticated_connections_per_ip"):
        if getattr(a, flag) < 0:
            p.error(f"--{flag.replace('_', '-')} must be >= 0 (0: derived)")
    secret = env("SLUICE_CLUSTER_SECRET", "")
    if a.control_plane:
        if a.broker_id is None or a.broker_id < 0:
            p.error("--control-plane needs --broker-id N (N >= 0)")
        if not secret:
            p.error("--control-plane needs the cluster secret in SLUICE_CLUSTER_SECRET")
    return BrokerConfig(
        control_plane_url=a.control_plane,
        broker_id=a.broker_id,
        advertised_url=a.advertised_url or f"http://{a.host}:{a.port}",
        cluster_secret=secret,
        metadata_path=a.config or "",
        data_dir=a.data_dir,
        port=a.port,
        host=a.host,
        loop=a.loop,
        http_front=a.http_front,
        fetch_path=a.fetch_path,
        fsync=not a.no_fsync,
        max_request_bytes=a.max_request_bytes,
        body_timeout_s=a.body_timeout_ms / 1000,
        request_head_timeout_s=a.request_head_timeout_ms / 1000,
        connections_max_idle_s=a.connections_max_idle_ms / 1000,
        max_unauthenticated_connections=a.max_unauthenticated_connections,
        max_unauthenticated_connections_per_ip=a.max_unauthenticated_connections_per_ip,
        housekeeping_interval_s=a.housekeeping_interval_ms / 1000,
        log_level=a.log_level.upper(),
        replica_lag_time_max_ms=a.replica_lag_time_max_ms,
        replica_fetch_wait_max_ms=a.replica_fetch_wait_max_ms,
        acks_all_timeout_s=a.acks_all_timeout_ms / 1000,
        scrub_interval_s=a.scrub_interval_ms / 1000,
        max_inflation_ratio=a.max_inflation_ratio,
        kafka_port=a.kafka_port,
        kafka_advertised=a.kafka_advertised
        or (f"{a.host}:{a.kafka_port}" if a.kafka_port else None),
        kafka_tls_cert=a.kafka_tls_cert,
        kafka_tls_key=a.kafka_tls_key,
    )
