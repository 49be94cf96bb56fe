"""The broker process: parse the command line, pick the event loop, serve until SIGTERM
(``brokernodes.broker_main`` runs it with the REST proxy's routes installed).

Start order: listen first (``/healthz`` answers, ``/readyz`` says 503) then open and recover
the partition logs, then ready. SIGTERM/SIGINT: not ready, stop accepting, release long
polls, let in-flight requests finish (``shutdown_timeout_s``), flush and close every log,
which writes the clean-shutdown markers. Under the control plane SIGTERM first asks the
controller to move leadership away (controlled shutdown) while the broker keeps serving, and
registration tells the controller whether every log was shut down cleanly last time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import sys
from collections.abc import Iterable

import prometheus_client
from aiohttp import web

from brokernodes.errors import UnauthenticatedError
from brokernodes.server import stop_deadline
from brokernodes.server.app import RouteInstaller, build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig, parse_args
from brokernodes.server.http.connection_limits import (
    ConnectionLimits,
    UnauthenticatedConnections,
    limits_for,
    raise_nofile_limit,
)
from brokernodes.server.http.fast import FastRoutes, FastServer
from brokernodes.server.http.handler import guarded_factory
from brokernodes.server.http.util import BROKER_KEY
from brokernodes.server.kafka.listener import KafkaListener
from brokernodes.server.metadata.client import ControlPlaneMetadataSource, offline_replica_logs
from brokernodes.server.metadata.cluster import (
    ClusterMetadata,
    MetadataError,
    MetadataSource,
    StaticMetadataSource,
)
from brokernodes.server.replica.metrics import ReplicationCollector
from brokernodes.storage.recovery import CLEAN_SHUTDOWN_FILE

logger = logging.getLogger("sluice.broker")

# glibc mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_malloc() -> None:
    """Keep freed request buffers in the heap instead of trimming and re-faulting them on
    every request (see STACK.md: uvloop + large bodies); same as MALLOC_TRIM_THRESHOLD_."""
    name = ctypes.util.find_library("c")
    if not name or os.environ.get("SLUICE_MALLOC_TUNE") == "0":
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(name)
        libc.mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024)
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)


GC_GEN0_THRESHOLD = 20_000


def tune_gc() -> None:
    """Move everything alive once the broker is ready (modules, the app, open logs, metadata)
    out of the cyclic collector's way (``gc.freeze``), and collect the young generation every
    ``GC_GEN0_THRESHOLD`` allocations instead of 700: a request allocates hundreds of
    container objects (aiohttp's request, response, headers, tasks), so the default ran a
    collection every request or two, and each full collection walked every long-lived object,
    a pause of milliseconds that showed in the latency tail. Frozen objects are still freed
    by reference counting; only cycles among them stay (the startup state lives for the
    process anyway). ``SLUICE_GC_TUNE=0`` keeps Python's defaults."""
    if os.environ.get("SLUICE_GC_TUNE") == "0":
        return
    gc.collect()
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_GEN0_THRESHOLD), gen1, gen2)


def logs_shut_down_cleanly(data_dir: str) -> bool:
    """True when every partition log under ``data_dir`` has its clean-shutdown marker (so
    nothing unflushed can have been lost since this broker last ran)."""
    try:
        names = os.listdir(data_dir)
    except FileNotFoundError:
        return True
    for name in names:
        path = os.path.join(data_dir, name)
        if name.endswith(".deleted") or not os.path.isdir(path):
            continue
        stem, _, number = name.rpartition("-")
        if (
            stem
            and number.isdigit()
            and not os.path.exists(os.path.join(path, CLEAN_SHUTDOWN_FILE))
        ):
            return False
    return True


def metadata_source(config: BrokerConfig) -> MetadataSource:
    if config.control_plane_url:
        assert config.broker_id is not None and config.advertised_url
        return ControlPlaneMetadataSource(
            config.control_plane_url,
            broker_id=config.broker_id,
            advertised_url=config.advertised_url,
            secret=config.cluster_secret,
            data_dir=config.data_dir,
            clean_shutdown=logs_shut_down_cleanly(config.data_dir),
            controlled_shutdown_timeout_s=config.controlled_shutdown_timeout_s,
            kafka_advertised=config.kafka_advertised,
        )
    return StaticMetadataSource(config.metadata_path)


def revocation_listener(broker: Broker, image: ClusterMetadata, kafka: KafkaListener | None = None):
    """Close the open WebSocket streams and Kafka connections of API keys that left the
    metadata (revoked)."""
    known = set(image.api_keys)

    def on_metadata(new: ClusterMetadata) -> None:
        nonlocal known
        gone = known - set(new.api_keys)
        known = set(new.api_keys)
        registry = getattr(broker, "websockets", None)
        for key_id in gone if registry is not None else ():
            registry.close_key(key_id, UnauthenticatedError("the API key was revoked"))
        for key_id in gone if kafka is not None else ():
            kafka.close_key(key_id)

    return on_metadata


EXIT_LOG_DIR_FAILED = 3
FAILED_SHUTDOWN_TIMEOUT_S = 5.0


def connection_limits(config: BrokerConfig) -> ConnectionLimits:
    """Raise the open-file limit and derive the connection caps from it (logged)."""
    nofile = raise_nofile_limit()
    limits = limits_for(
        nofile,
        request_head_timeout_s=config.request_head_timeout_s,
        body_timeout_s=config.body_timeout_s,
        idle_timeout_s=config.connections_max_idle_s,
        max_unauthenticated=config.max_unauthenticated_connections,
        max_unauthenticated_per_ip=config.max_unauthenticated_connections_per_ip,
    )
    logger.info(
        "open-file limit %d: at most %d unauthenticated connections (%d per address); "
        "head timeout %gs, body timeout %gs, idle timeout %gs",
        nofile,
        limits.max_unauthenticated,
        limits.max_unauthenticated_per_ip,
        limits.request_head_timeout_s,
        limits.body_timeout_s,
        limits.idle_timeout_s,
    )
    return limits


async def listen(
    config: BrokerConfig,
    app: web.Application,
    runner: web.AppRunner,
    limits: ConnectionLimits | None = None,
    pool: UnauthenticatedConnections | None = None,
) -> tuple[asyncio.AbstractServer, FastServer | None]:
    """The listening socket: the lean HTTP/1.1 front (``http.fast``) handing other requests
    to aiohttp, or aiohttp alone with ``--http-front aiohttp``; both with the connection
    limits (``connection_limits``) and the unauthenticated-connection ``pool`` (shared with
    the Kafka listener when there is one)."""
    loop = asyncio.get_running_loop()
    assert runner.server is not None
    limits = limits or connection_limits(config)
    if pool is None:
        pool = UnauthenticatedConnections(
            limits.max_unauthenticated, limits.max_unauthenticated_per_ip
        )
    app[BROKER_KEY].connection_quotas.on_admitted = pool.authenticated
    fast = None
    factory = guarded_factory(runner.server, limits, pool)
    if config.http_front == "fast":
        (middleware,) = app.middlewares
        fast = factory = FastServer(
            FastRoutes(app, middleware),
            factory,
            body_timeout_s=config.body_timeout_s,
            max_request_bytes=config.max_request_bytes,
            limits=limits,
            pool=pool,
        )
    server = await loop.create_server(
        factory, config.host, config.port, reuse_address=True, backlog=1024
    )
    return server, fast


async def serve(config: BrokerConfig, extra_routes: Iterable[RouteInstaller] = ()) -> int:
    """Run the broker until SIGTERM/SIGINT (exit code 0) or until its log directory fails
    (``EXIT_LOG_DIR_FAILED``: leadership is handed away first, no clean-shutdown markers).
    ``extra_routes`` are installed into the app after the broker's own routes."""
    metadata = metadata_source(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if not stop.is_set():  # the stop's hard bound (stop_deadline.py)
            stop_deadline.arm(
                stop_deadline.bound_s(
                    config.controlled_shutdown_timeout_s, config.shutdown_timeout_s
                )
            )
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    # Control plane: a cached image, or the first pull (retried until it answers or SIGTERM)
    starting = asyncio.create_task(metadata.start())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait((starting, stopped), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await metadata.close()
        logger.info("stopped before the first metadata arrived")
        return 0
    starting.result()
    broker = Broker(config, metadata)
    if isinstance(metadata, ControlPlaneMetadataSource):  # unclean recovery's log reports
        metadata.replica_logs = lambda: offline_replica_logs(broker.replicas.partitions.values())
        metadata.keys_used, metadata.keys_unsent = broker.key_use.drain, broker.key_use.restore
    metadata.add_listener(broker.replicas.reconcile)
    limits = connection_limits(config)
    # one budget of unauthenticated connections for the HTTP fronts and the Kafka listener
    pool = UnauthenticatedConnections(limits.max_unauthenticated, limits.max_unauthenticated_per_ip)
    kafka = KafkaListener(broker, pool) if config.kafka_port else None
    metadata.add_listener(revocation_listener(broker, metadata.global_image(), kafka))
    app = build_app(broker, extra_routes)
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        shutdown_timeout=config.shutdown_timeout_s,
        lingering_time=2.0,
        keepalive_timeout=config.connections_max_idle_s,
        read_bufsize=256 * 1024,
    )
    await runner.setup()
    broker.metrics.track_state(
        lambda: [
            (p.topic, p.partition, p.log.log_end_offset, p.log.high_watermark)
            for p in list(broker.replicas.partitions.values())
        ],
        lambda: (
            (len(runner.server.connections) if runner.server else 0)
            + (len(fast.connections) if fast is not None else 0)
            + (len(kafka.connections) if kafka is not None else 0)
        ),
    )
    broker.metrics.registry.register(ReplicationCollector(broker.replicas))
    listener, fast = await listen(config, app, runner, limits, pool)
    if kafka is not None:
        await kafka.start()
    logger.info(
        "broker %d listening on http://%s:%d (loop=%s, fetch=%s, front=%s)",
        metadata.current().broker_id,
        config.host,
        config.port,
        config.loop,
        config.fetch_path,
        config.http_front,
    )
    start = asyncio.create_task(broker.start())
    done, _ = await asyncio.wait((start, stopped), return_when=asyncio.FIRST_COMPLETED)
    if start in done:
        start.result()  # a storage error at start ends the process
        logger.info("broker ready: %d partitions", len(broker.replicas.partitions))
        tune_gc()
        failed = asyncio.create_task(broker.replicas.log_dir_failed.wait())
        await asyncio.wait((stopped, failed), return_when=asyncio.FIRST_COMPLETED)
        failed.cancel()
    else:
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await start
    logger.info("shutting down")
    if start in done:
        # after a disk failure hand leadership away briefly, then go (Kafka halts at once)
        failed_dir = broker.replicas.log_dir_failed.is_set()
        await metadata.controlled_shutdown(FAILED_SHUTDOWN_TIMEOUT_S if failed_dir else None)
    broker.stopping = True
    for p in broker.replicas.partitions.values():
        p.wake_all()
    listener.close()
    if kafka is not None:
        await kafka.close(config.shutdown_timeout_s)
    if fast is not None:
        await fast.shutdown(config.shutdown_timeout_s)
    await runner.cleanup()
    await metadata.close()
    await broker.close()
    if broker.replicas.log_dir_failed.is_set():
        logger.error("stopped: the log directory %s failed", config.data_dir)
        return EXIT_LOG_DIR_FAILED
    logger.info("stopped cleanly")
    return 0


def main(argv: list[str] | None = None, extra_routes: Iterable[RouteInstaller] = ()) -> int:
    """Run one broker process; ``brokernodes.broker_main`` calls it with the proxy's routes."""
    config = parse_args(argv)
    logging.basicConfig(
        level=config.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from brokernodes.security import redaction  # credentials never reach the log

    redaction.install()
    tune_malloc()
    prometheus_client.disable_created_metrics()  # one broker per process: no *_created noise
    loop_factory = None
    if config.loop == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(serve(config, tuple(extra_routes)))
    except MetadataError as e:
        logger.error("%s", e)
        return 2
    return 0
