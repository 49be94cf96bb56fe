"""The Kafka listener: accepts TCP (or TLS) connections and runs each as a
:class:`~.connection.KafkaConnection`. It knows the open connections by API key, so a revoked
key's connections close at once (as its WebSocket streams do)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import defaultdict
from typing import TYPE_CHECKING

from brokernodes.server.kafka.connection import KafkaConnection

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.kafka")

# connections not yet authenticated, at most (each must finish SASL within the head timeout)
MAX_UNAUTHENTICATED = 1024


class KafkaListener:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.connections: set[KafkaConnection] = set()
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.AbstractServer | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.config.kafka_tls_cert:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.config.kafka_tls_cert, self.config.kafka_tls_key)
        return context

    @property
    def security_protocol(self) -> str:
        return "SASL_SSL" if self.config.kafka_tls_cert else "SASL_PLAINTEXT"

    async def start(self) -> None:
        assert self.config.kafka_port
        self._server = await asyncio.start_server(
            self._accept,
            self.config.host,
            self.config.kafka_port,
            ssl=self.ssl_context(),
            reuse_address=True,
            backlog=1024,
            limit=1 << 20,
        )
        logger.info(
            "Kafka listener on %s:%d (%s, advertised as %s)",
            self.config.host,
            self.config.kafka_port,
            self.security_protocol,
            self.config.kafka_advertised,
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        unauthenticated = sum(1 for c in self.connections if not c.ctx.authenticated)
        if unauthenticated >= MAX_UNAUTHENTICATED or self.broker.stopping:
            writer.transport.abort()
            return
        connection = KafkaConnection(self, self.broker, reader, writer)
        self.connections.add(connection)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            if task is not None:
                self._tasks.discard(task)

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
            if not c.busy:
                c.close()
        tasks = list(self._tasks)
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
        for c in list(self.connections):
            c.close()
