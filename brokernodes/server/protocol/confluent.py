"""Confluent REST Proxy fidelity: integer error codes and media types (pure).

Sluice's error codes are stable strings (``UNKNOWN_TOPIC_OR_PARTITION``). Confluent's REST
Proxy answers integers instead: an HTTP status, or a status with two more digits that name
the cause (40403, 40902, ...). On Confluent's routes (``/v3/...``, ``/topics/...``,
``/consumers/...``) an error body therefore carries Confluent's integer as ``error_code`` and
Sluice's string as ``sluice_code``, so a Confluent client and a Sluice user each find what
they look for; Sluice's own routes (``/sluice/v1/...``) keep the string as ``error_code``.

The rule for the integer: Confluent's specific code when Confluent has one for that cause
(``SPECIFIC_CODES``), else the HTTP status itself (what Confluent's REST framework answers
for errors without a code of their own). An error may carry its own ``confluent_status`` /
``confluent_code`` (a payload error is Confluent's 422, a v2 route's unknown topic 40401)
which wins over the table. docs/data-plane-api.md, "Confluent routes", has the table.

Media types follow Confluent's negotiation: a request body of a type the route does not
consume is refused with 415, an ``Accept`` the route cannot produce with 406
(``negotiate``).
"""

from __future__ import annotations

from collections.abc import Sequence

from brokernodes.errors import SluiceError
from brokernodes.server.protocol.responses import error_body, status_for

JSON = "application/json"
V2 = "application/vnd.kafka.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"

_PREFIXES = ("/v3/", "/topics/", "/consumers/")
_ROOTS = frozenset({"/v3", "/topics", "/consumers"})

# Sluice's code -> Confluent's specific integer (else the HTTP status is the integer)
SPECIFIC_CODES: dict[str, int] = {
    "UNAUTHENTICATED": 40101,
    "TOPIC_AUTHORIZATION_FAILED": 40301,
    "GROUP_AUTHORIZATION_FAILED": 40301,
    "CLUSTER_AUTHORIZATION_FAILED": 40301,
    # Kafka's UnknownTopicOrPartitionException as Confluent's v3 answers it
    "UNKNOWN_TOPIC_OR_PARTITION": 40403,
    "UNKNOWN_CONSUMER_INSTANCE": 40403,
    "CONSUMER_FORMAT_MISMATCH": 40601,
    "CONSUMER_INSTANCE_EXISTS": 40902,
    "TOO_MANY_CONSUMER_INSTANCES": 42901,
    "TOO_MANY_STREAMS": 42901,
    # a batch Kafka refuses as the client's fault (Confluent's "Kafka bad request")
    "CORRUPT_MESSAGE": 40002,
    "INVALID_RECORD": 40002,
    "INVALID_TIMESTAMP": 40002,
    "UNSUPPORTED_COMPRESSION_TYPE": 40002,
    # the broker's fault: Kafka error, and Kafka's retriable errors
    "KAFKA_STORAGE_ERROR": 50002,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 50003,
    "FENCED_LEADER_EPOCH": 50003,
    "UNKNOWN_LEADER_EPOCH": 50003,
}

# what v2 produce answers per record (Confluent: 1 non-retriable, 2 retriable)
RETRIABLE_CODES = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "KAFKA_STORAGE_ERROR",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
    }
)


class UnsupportedMediaTypeError(SluiceError):
    """A request body of a type the route does not consume (415)."""

    error_code = "UNSUPPORTED_MEDIA_TYPE"


class NotAcceptableError(SluiceError):
    """An ``Accept`` header the route cannot answer (406)."""

    error_code = "NOT_ACCEPTABLE"


class ConsumerFormatMismatchError(NotAcceptableError):
    """A v2 records ``Accept`` naming another embedded format than the instance's (40601)."""

    error_code = "CONSUMER_FORMAT_MISMATCH"


def is_confluent_path(path: str) -> bool:
    """A Confluent REST Proxy route (v3 or v2), whose errors carry Confluent's integers."""
    return path.startswith(_PREFIXES) or path in _ROOTS


def confluent_status_code(error: SluiceError) -> tuple[int, int]:
    """(HTTP status, Confluent's integer ``error_code``) for an error on a Confluent route."""
    status = getattr(error, "confluent_status", None) or status_for(error.error_code)
    code = getattr(error, "confluent_code", None) or SPECIFIC_CODES.get(error.error_code, status)
    return status, code


def confluent_error_body(error: SluiceError) -> tuple[int, dict[str, object]]:
    """(HTTP status, ``{"error_code": <int>, "message", "sluice_code", ...details}``)."""
    status, code = confluent_status_code(error)
    body = error_body(error)
    body["sluice_code"] = body["error_code"]
    body["error_code"] = code
    return status, body


def retriable(error: SluiceError) -> bool:
    return error.error_code in RETRIABLE_CODES


# --- media types ----------------------------------------------------------------------------


def media_type(header: str) -> str:
    """``"Application/JSON; charset=utf-8"`` -> ``"application/json"``."""
    return header.partition(";")[0].strip().lower()


def check_content_type(header: str | None, consumed: Sequence[str]) -> str | None:
    """The request body's media type if the route consumes it (None when the request names
    none: a body without a type is read as the route's first type); else 415."""
    if header is None or header == consumed[0]:
        return header
    kind = media_type(header)
    if kind in consumed:
        return kind
    raise UnsupportedMediaTypeError(
        f"Content-Type {kind or header!r} is not accepted here; send " + " or ".join(consumed)
    )


def _accept_ranges(header: str) -> list[tuple[float, str]]:
    """``Accept`` -> [(q, media range)], highest q first, ranges with q=0 left out."""
    out = []
    for i, part in enumerate(header.split(",")):
        fields = part.split(";")
        kind = fields[0].strip().lower()
        if not kind:
            continue
        q = 1.0
        for param in fields[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            out.append((-q, i, kind))
    out.sort()
    return [(-negq, kind) for negq, _, kind in out]


def _matches(media_range: str, offered: str) -> bool:
    if media_range in ("*/*", offered):
        return True
    main, _, sub = media_range.partition("/")
    return sub == "*" and offered.startswith(main + "/")


def negotiate(accept: str | None, offered: Sequence[str]) -> str:
    """The media type to answer in: the first of ``offered`` the ``Accept`` header allows
    (by its q-values, then ``offered``'s order); 406 if it allows none."""
    if accept is None or accept == "*/*" or accept == offered[0]:
        return offered[0]
    if ";" not in accept:  # no q-values (what clients send): ranges in order, no sort
        ranges = [r.strip().lower() for r in accept.split(",")]
    else:
        ranges = [r for _, r in _accept_ranges(accept)]
    for media_range in ranges:
        for kind in offered:
            if _matches(media_range, kind):
                return kind
    raise NotAcceptableError(
        f"Accept {accept!r} allows none of the types this route answers in: " + ", ".join(offered)
    )


# a v2 consumer instance's format -> the media type its records are answered in
EMBEDDED_TYPES = {"binary": V2_BINARY, "json": V2_JSON}
_EMBEDDED_PREFIX = "application/vnd.kafka."


def records_media_type(accept: str | None, fmt: str) -> str:
    """The media type of a v2 ``records`` answer in format ``fmt``: Confluent's embedded
    format type (``application/vnd.kafka.binary.v2+json``, ``...json.v2+json``); Sluice's
    ``string`` format answers ``application/vnd.kafka.v2+json``. An ``Accept`` naming
    another embedded format is Confluent's 40601, any other it cannot meet 406."""
    own = EMBEDDED_TYPES.get(fmt, V2)
    try:
        return negotiate(accept, (own, V2, JSON))
    except NotAcceptableError:
        if accept is not None and _EMBEDDED_PREFIX in accept.lower():
            raise ConsumerFormatMismatchError(
                f"Accept {accept!r} asks for another embedded format than this consumer "
                f"instance's ({fmt}: {own}); ask for {own}, or create an instance with the "
                "format you want"
            ) from None
        raise
