"""Kafka API handlers: admin (see docs/kafka-protocol.md)."""

from __future__ import annotations

from brokernodes.server.kafka.context import Handler

HANDLERS: dict[int, Handler] = {}
