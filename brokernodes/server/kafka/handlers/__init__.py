"""The Kafka API handlers by API key. Each module owns a family of APIs and exports a
``HANDLERS`` table; a handler takes (context, header, decoded request) and returns the
response dict (``None``: no response, acks=0 produce)."""

from __future__ import annotations

from brokernodes.server.kafka.context import Handler
from brokernodes.server.kafka.handlers import admin, core, data, groups, transactions

HANDLERS: dict[int, Handler] = {
    **core.HANDLERS,
    **data.HANDLERS,
    **groups.HANDLERS,
    **admin.HANDLERS,
    **transactions.HANDLERS,
}
