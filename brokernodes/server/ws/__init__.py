"""The broker's WebSocket streams: the shared socket shell (``socket``), the produce,
consume and group streams, and ``routes``, which adds them to the app. The registry of open
streams is the broker's own (``brokernodes.server.ws_registry``)."""
