"""What the broker's HTTP and WebSocket APIs say, without I/O: query parameters, error
bodies, JSON records, read cursors and WebSocket frames. An import-linter contract keeps
this package free of asyncio and aiohttp, so it is tested and reused without an event loop."""
