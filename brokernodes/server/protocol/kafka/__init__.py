"""Kafka's binary protocol, sans-IO: the compact message schema (``messages/``), codecs
generated from it, request/response framing and Kafka's error codes. The asyncio listener
is ``brokernodes.server.kafka``; docs/kafka-protocol.md has the supported APIs."""
