"""The Kafka listener: accepts TCP (or TLS) connections and runs each as a
:class:`~.connection.KafkaConnection`. It knows the open connections by API key, so a revoked
key's connections close at once (as its WebSocket streams do).

Connections that have not finished SASL count among the broker's unauthenticated
connections, in the pool the HTTP fronts use (``http.connection_limits``), so one budget per
client address and in total covers both fronts; over it the oldest is evicted (closed). A
TLS handshake must finish within the request-head timeout. Metrics: Kafka requests in
``sluice_request_seconds`` by endpoint ``kafka_<api>``, open connections in
``sluice_kafka_connections``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import ssl
from collections import defaultdict
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokernodes.server.http.connection_limits import UnauthenticatedConnections, limits_for
from brokernodes.server.kafka.connection import KafkaConnection, endpoint
from brokernodes.server.kafka.framing import FrameReader

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.kafka")


def default_pool(broker: Broker) -> UnauthenticatedConnections:
    """The caps ``server.main`` derives, for a listener started without the shared pool."""
    config = broker.config
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = limits_for(
        soft if soft != resource.RLIM_INFINITY else 65536,
        request_head_timeout_s=config.request_head_timeout_s,
        body_timeout_s=config.body_timeout_s,
        idle_timeout_s=config.connections_max_idle_s,
        max_unauthenticated=config.max_unauthenticated_connections,
        max_unauthenticated_per_ip=config.max_unauthenticated_connections_per_ip,
    )
    return UnauthenticatedConnections(limits.max_unauthenticated, limits.max_unauthenticated_per_ip)


class _ConnectionsCollector(Collector):
    def __init__(self, listener: KafkaListener) -> None:
        self._listener = listener

    def collect(self):
        connections = self._listener.connections
        gauge = GaugeMetricFamily(
            "sluice_kafka_connections",
            "Open Kafka-protocol connections, by whether SASL has succeeded",
            labels=["authenticated"],
        )
        authenticated = sum(1 for c in connections if c.ctx.authenticated)
        gauge.add_metric(["true"], authenticated)
        gauge.add_metric(["false"], len(connections) - authenticated)
        yield gauge


class KafkaListener:
    def __init__(self, broker: Broker, pool: UnauthenticatedConnections | None = None) -> None:
        self.broker = broker
        self.config = broker.config
        self.pool = pool if pool is not None else default_pool(broker)
        self.connections: set[KafkaConnection] = set()
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.AbstractServer | None = None
        self._latency: dict[int, object] = {}

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.config.kafka_tls_cert:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.config.kafka_tls_cert, self.config.kafka_tls_key)
        return context

    @property
    def security_protocol(self) -> str:
        return "SASL_SSL" if self.config.kafka_tls_cert else "SASL_PLAINTEXT"

    @property
    def port(self) -> int:
        """The bound port (``kafka_port`` 0 picks a free one)."""
        assert self._server is not None and self._server.sockets
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        assert self.config.kafka_port is not None
        context = self.ssl_context()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: FrameReader(self._accept),
            self.config.host,
            self.config.kafka_port,
            ssl=context,
            ssl_handshake_timeout=self.config.request_head_timeout_s if context else None,
            reuse_address=True,
            backlog=1024,
        )
        with contextlib.suppress(ValueError):  # a listener restarted on the same broker
            self.broker.metrics.registry.register(_ConnectionsCollector(self))
        logger.info(
            "Kafka listener on %s:%d (%s, advertised as %s)",
            self.config.host,
            self.port,
            self.security_protocol,
            self.config.kafka_advertised,
        )

    def observe(self, api_key: int, seconds: float) -> None:
        """One answered request of ``api_key`` (``sluice_request_seconds``)."""
        child = self._latency.get(api_key)
        if child is None:
            child = self._latency[api_key] = self.broker.metrics.request_seconds.labels(
                endpoint(api_key)
            )
        child.observe(seconds)  # type: ignore[attr-defined]

    def _accept(self, reader: FrameReader) -> None:
        """A connection is up (its protocol's ``connection_made``): run it as a task."""
        transport = reader.transport
        assert transport is not None
        if self.broker.stopping:
            transport.abort()
            return
        connection = KafkaConnection(self, self.broker, reader)
        self.connections.add(connection)
        self.pool.track(transport, connection.peer, connection.evict)
        task = connection.task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._tasks.add(task)

    async def _serve(self, connection: KafkaConnection) -> None:
        try:
            await connection.run()
        except asyncio.CancelledError:
            pass  # cut off by ``close``: the task ends here
        finally:
            self.pool.forget(connection.transport)
            self.connections.discard(connection)
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]

    def close_key(self, key_id: str) -> None:
        """Close every connection authenticated with ``key_id`` (revoked)."""
        for c in list(self.connections):
            if c.key_id == key_id:
                logger.info("closing Kafka connection from %s: API key revoked", c.peer)
                c.close()

    def by_key(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for c in self.connections:
            if c.key_id:
                counts[c.key_id] += 1
        return dict(counts)

    async def close(self, timeout: float) -> None:
        """Stop accepting, let answers in progress finish (bounded), then cut the rest."""
        if self._server is not None:
            self._server.close()
        for c in list(self.connections):
            if not c.busy:  # idle, or muted after a throttled answer: nothing to finish
                c.close()
                if c.task is not None:
                    c.task.cancel()
        tasks = list(self._tasks)
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
        for c in list(self.connections):
            c.close()
