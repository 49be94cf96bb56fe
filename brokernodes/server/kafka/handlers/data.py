"""Kafka API handlers: the data plane (Metadata, Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, InitProducerId), one module per family, merged here."""

from __future__ import annotations

from brokernodes.server.kafka.context import Handler
from brokernodes.server.kafka.handlers import fetch, metadata, offsets, produce, produce_one

HANDLERS: dict[int, Handler] = {
    **metadata.HANDLERS,
    **fetch.HANDLERS,
    **offsets.HANDLERS,
    **produce.HANDLERS,
    **produce_one.HANDLERS,  # the usual Produce request, in front of the general one
}
