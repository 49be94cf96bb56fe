"""One front door for REST v2 consumer instances: a call for an instance that lives on
another broker is forwarded there (docs/data-plane-api.md, "One front door").

An instance lives on the broker that created it (it holds a group member and its fetch
positions in memory). Names the broker makes up carry its id (``rest-b<id>-<hex>``), so a
call for one goes straight to that broker. For a name the client chose, the other brokers
are asked in turn (a call for an instance a broker does not have is answered
``UNKNOWN_CONSUMER_INSTANCE`` before anything else is done, so asking is harmless), and the
broker that had it is remembered for the next call. Forwarded calls carry
``Sluice-Forwarded`` and are never forwarded again.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from brokernodes.errors import SluiceError
from brokernodes.server.http.body import read_body
from brokernodes.server.http.forward import forwardable, forwarder
from brokernodes.server.protocol.forwarding import LeaderNotAvailableError

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

Handler = Callable[[Any], Awaitable[web.StreamResponse]]

_OWNED = re.compile(r"rest-b(\d+)-[0-9a-f]+")
KNOWN_OWNERS = 10_000  # remembered (group, instance) -> broker, least recently used dropped


def instance_name(broker_id: int) -> str:
    """A made-up instance name that names its broker."""
    return f"rest-b{broker_id}-{secrets.token_hex(8)}"


def owner_of(name: str) -> int | None:
    """The broker a made-up name names (None: a name the client chose)."""
    m = _OWNED.fullmatch(name)
    return int(m.group(1)) if m else None


def _unknown_instance(status: int, data: bytes) -> bool:
    """The answer says the broker has no such instance (try the next one)."""
    if status != 404:
        return False
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(doc, dict):
        return False
    return "UNKNOWN_CONSUMER_INSTANCE" in (doc.get("sluice_code"), doc.get("error_code"))


class InstanceRouter:
    """Wraps the instance routes' handlers (``routed``) for one broker."""

    def __init__(self, broker: Broker, unknown: type[Exception]) -> None:
        self.broker = broker
        self.unknown = unknown  # what a handler raises for an instance it does not have
        self.owners: OrderedDict[tuple[str, str], int] = OrderedDict()

    def routed(self, handler: Handler) -> Handler:
        async def route(request: Any) -> web.StreamResponse:
            try:
                return await handler(request)
            except self.unknown:
                if not forwardable(request):
                    raise
                answer = await self.elsewhere(request)
                if answer is None:
                    raise
                return answer

        return route

    def _candidates(self, group: str, name: str) -> list[int]:
        me = self.broker.image.broker_id
        first = [b for b in (owner_of(name), self.owners.get((group, name))) if b is not None]
        rest = sorted(self.broker.image.brokers)
        out: list[int] = []
        for b in (*first, *rest):
            if b != me and b not in out and b in self.broker.image.brokers:
                out.append(b)
        return out

    async def elsewhere(self, request: Any) -> web.Response | None:
        """The answer of the broker that has the instance, or None if none has it."""
        group, name = request.match_info["group"], request.match_info["instance"]
        config = self.broker.config
        body = None
        if request.method != "GET" and request.method != "DELETE":
            body = await read_body(
                request, max_bytes=config.max_request_bytes, timeout=config.body_timeout_s
            )
        fwd = forwarder(self.broker)
        unreachable: SluiceError | None = None
        for b in self._candidates(group, name):
            try:
                answer = await fwd.forward_to(
                    request,
                    lambda b=b: fwd.broker_target(b),
                    f"broker {b}, which may hold consumer instance {name!r}",
                    body,
                    idempotent=False,  # a read of records moves the instance's positions
                )
            except LeaderNotAvailableError as e:  # down: the others may have it
                unreachable = e
                continue
            if _unknown_instance(answer.status, answer.body):  # type: ignore[arg-type]
                continue
            self.owners[(group, name)] = b
            self.owners.move_to_end((group, name))
            while len(self.owners) > KNOWN_OWNERS:
                self.owners.popitem(last=False)
            return answer
        self.owners.pop((group, name), None)
        if unreachable is not None:
            raise unreachable
        return None
