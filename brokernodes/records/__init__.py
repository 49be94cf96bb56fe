"""Kafka RecordBatch v2 and Kafka's default partitioners: sans-IO (no sockets, no files, no
asyncio)."""
