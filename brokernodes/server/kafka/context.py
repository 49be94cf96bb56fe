"""What a Kafka API handler is given: the broker, the connection's identity, and the one
authorization call (``authorize``) every handler goes through."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brokernodes.server.auth import Principal, current_client_host
from brokernodes.server.connections import current_connection

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.protocol.kafka.frames import RequestHeader


@dataclass(slots=True)
class FileRecords:
    """A partition's record data in a Fetch answer as open segment-file slices: the encoder
    writes its length and the connection sends the slices with ``sendfile`` (or copies them
    over TLS), then closes them."""

    slices: list  # list[brokernodes.server.http.sendfile.OpenSlice]
    length: int


@dataclass(slots=True)
class EncodedAnswer:
    """An answer body a handler encoded itself (the usual Produce and Fetch answers): the
    connection frames these chunks (bytes, and ``FileRecords`` sent with sendfile) instead
    of running the generated encoder."""

    chunks: list
    size: int  # the body's bytes, deferred records included
    throttle_time_ms: int


@dataclass(slots=True)
class KafkaContext:
    broker: Broker
    peer_host: str | None
    transport: Any  # the connection's transport (connection quotas count it)
    tls: bool = False
    auth_header: str | None = None  # "Bearer <key_id>.<secret>" once SASL succeeded
    principal: Principal | None = None
    client_id: str | None = None
    # file slices opened for the answer being built (closed once it is sent or dropped)
    open_files: list[FileRecords] = field(default_factory=list)
    # KIP-219 for a request answered with nothing (acks=0 produce): the handler sets the
    # throttle here and the connection mutes for it as it does for ``throttle_time_ms``
    mute_ms: int = 0

    def authorize(
        self,
        operation: str,
        resource_type: str = "cluster",
        resource_name: str = "",
        *,
        count: bool = True,
    ) -> Principal:
        """``Broker.authorize`` with this connection's credentials: re-checked on every
        request, so a revoked key fails at its next request. Also sets the request's tenant
        (topic names resolve within it). Raises the same errors as on HTTP. ``count=False``
        for probes that are part of one request (listing filters, authorized operations),
        so usage metering counts the request, not every resource it looked at."""
        if current_connection.get() is not self.transport:  # set once per task's context
            current_connection.set(self.transport)
        if current_client_host.get() != self.peer_host:
            current_client_host.set(self.peer_host)
        return self.broker.authorize(
            self.auth_header, operation, resource_type, resource_name, count=count
        )

    @property
    def authenticated(self) -> bool:
        return self.auth_header is not None


Handler = Callable[[KafkaContext, "RequestHeader", dict], Awaitable[dict | EncodedAnswer | None]]
