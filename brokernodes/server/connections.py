"""Connection-count quotas (``max_connections``): how many client connections a tenant (and
a service account with its own quota) may hold open on this broker at once.

A connection counts for a tenant from its first authenticated request until it closes; a
WebSocket is the connection it was upgraded from, so it counts once. A request that would
open the tenant's (or the principal's) N+1-th connection is refused with ``QUOTA_EXCEEDED``
(403, like the storage quota: retrying helps only once the client closes other connections);
that connection stays uncounted, and each further request on it is checked again.
Connections are tracked by their transport; a closed one is forgotten the next time the
tenant's connections are counted, so nothing holds a count after the socket is gone.
Keys without a tenant (static-file brokers) are never counted.

Every admitted connection (with or without a tenant) is reported to ``on_admitted``: it then
stops counting among the unauthenticated connections (``connection_limits``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from brokernodes.server.throttle import DataPlaneQuotaExceededError

if TYPE_CHECKING:
    from brokernodes.security.quotas import QuotaManager
    from brokernodes.server.auth import Principal


class Connection(Protocol):
    def is_closing(self) -> bool: ...


# The request's connection (its transport), set by the HTTP middleware for the request's task.
current_connection: ContextVar[Any] = ContextVar("sluice_connection", default=None)

_PRUNE_ALL_EVERY = 1024  # new bindings between sweeps of every tenant's connections


class ConnectionQuotas:
    """Binds connections to (tenant, principal) and refuses those over the limits.

    ``manager()`` returns the broker's current ``QuotaManager`` (quotas from the metadata
    image); ``connections`` limits are read from it on every new binding, so a changed quota
    applies to the next connection.
    """

    def __init__(self, manager: Callable[[], QuotaManager]) -> None:
        self._manager = manager
        self._bound: dict[Connection, tuple[str, str]] = {}
        self._by_tenant: dict[str, set[Connection]] = defaultdict(set)
        self._by_principal: dict[tuple[str, str], set[Connection]] = defaultdict(set)
        self._new_bindings = 0
        # called with each connection a request was admitted on (connection_limits)
        self.on_admitted: Callable[[Connection], None] | None = None

    def count(self, tenant: str, principal: str | None = None) -> int:
        """Open connections of the tenant (or of one of its principals)."""
        conns = (
            self._by_tenant.get(tenant)
            if principal is None
            else self._by_principal.get((tenant, principal))
        )
        return sum(1 for c in conns or () if not c.is_closing())

    def admit(self, connection: Connection | None, principal: Principal) -> None:
        """Count ``connection`` for ``principal``'s tenant, or raise ``QUOTA_EXCEEDED``."""
        tenant = principal.tenant
        if connection is None:
            return
        if tenant is None:
            if self.on_admitted is not None:
                self.on_admitted(connection)
            return
        owner = (tenant, principal.name)
        bound = self._bound.get(connection)
        if bound == owner:
            return
        if bound is not None:  # a keep-alive connection now used with another key
            self._unbind(connection, bound)
        self._prune(tenant)
        manager = self._manager()
        who = "your organisation"
        error = manager.check_count(tenant, "connections", self.count(tenant))
        if error is None:
            who = principal.name
            error = manager.check_count(
                tenant, "connections", self.count(tenant, principal.name), principal=principal.name
            )
        if error is not None:
            raise DataPlaneQuotaExceededError(
                "connections",
                error.used,
                error.limit,
                f"connection quota exceeded: {who} already holds {error.used} open "
                f"connections to this broker, and its limit is {error.limit}; close idle "
                "connections (one keep-alive connection per client is enough) or ask an admin "
                "to raise max_connections",
            )
        self._bound[connection] = owner
        self._by_tenant[tenant].add(connection)
        self._by_principal[owner].add(connection)
        self._new_bindings += 1
        if self.on_admitted is not None:
            self.on_admitted(connection)
        if self._new_bindings % _PRUNE_ALL_EVERY == 0:
            for t in list(self._by_tenant):
                self._prune(t)

    def _unbind(self, connection: Connection, owner: tuple[str, str]) -> None:
        del self._bound[connection]
        self._by_tenant[owner[0]].discard(connection)
        self._by_principal[owner].discard(connection)

    def _prune(self, tenant: str) -> None:
        for c in [c for c in self._by_tenant.get(tenant, ()) if c.is_closing()]:
            self._unbind(c, self._bound[c])
        if not self._by_tenant.get(tenant):
            self._by_tenant.pop(tenant, None)
        for key in [k for k, v in self._by_principal.items() if k[0] == tenant and not v]:
            del self._by_principal[key]
