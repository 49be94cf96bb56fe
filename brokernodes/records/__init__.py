"""Kafka RecordBatch v2: a sans-IO codec (no sockets, no files, no asyncio)."""
