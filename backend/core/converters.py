"""URL path converters shared by the apps."""


class TopicNameConverter:
    """Kafka topic names: 1-249 of [A-Za-z0-9._-] (the service refuses '.', '..' and '__x')."""

    regex = r"[A-Za-z0-9._-]{1,249}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class KeyIdConverter:
    """An API key id: 16 URL-safe characters."""

    regex = r"[A-Za-z0-9_-]{16}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
