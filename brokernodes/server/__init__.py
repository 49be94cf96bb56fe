"""The broker's asyncio shell: HTTP handlers, zero-copy fetch, partition management."""
