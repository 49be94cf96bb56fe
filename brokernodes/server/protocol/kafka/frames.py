"""Request and response framing: the 4-byte size prefix and the request/response headers.

A request is ``size:int32`` then header v1 (api_key, api_version, correlation_id, client_id
as a *non-compact* nullable string) or, when the API version is flexible, header v2 (v1 plus
a tagged-field section). A response is ``size:int32``, the correlation id, a tagged-field
section when the request was flexible (header v1), then the body. ApiVersions answers always
use header v0, so a client that does not yet know the broker's versions can read them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka.codec import Out, ProtocolError, read_string, skip_tags

_HEAD = struct.Struct(">hhi")
_HEAD_ID = struct.Struct(">hhih")  # and the client id's length
_SIZE = struct.Struct(">i")
_HEAD_V0 = struct.Struct(">ii")  # size, correlation id
_HEAD_V1 = struct.Struct(">iiB")  # and an empty tagged-field section

# A client that announces a bigger request than this is cut off before it is read (Kafka's
# socket.request.max.bytes defaults to 100 MiB); the listener passes the broker's limit.
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool
    supported: bool  # the API and version are ones Sluice speaks
    body_offset: int  # where the request body starts in the frame


def frame_size(prefix: bytes) -> int:
    (size,) = _SIZE.unpack(prefix)
    return size


# supported api_key << 16 | version -> whether it is flexible, filled as requests arrive
# (only supported pairs: at most the API table's size)
_FLEXIBLE: dict[int, bool] = {}


def parse_request_header(frame) -> RequestHeader:
    """The header of one request frame (the bytes after the size prefix). An unknown API or
    an unsupported version is reported in ``supported``, not raised: the caller decides how
    to answer (ApiVersions answers even then)."""
    size = len(frame)
    if size < _HEAD.size:
        raise ProtocolError("a request shorter than its header")
    if size >= _HEAD_ID.size:
        api_key, version, correlation_id, n = _HEAD_ID.unpack_from(frame, 0)
    else:
        (api_key, version, correlation_id), n = _HEAD.unpack_from(frame, 0), -2
    flexible = _FLEXIBLE.get(api_key << 16 | version)
    supported = flexible is not None
    if not supported:
        api = apis.apis().get(api_key)
        supported = api is not None and api.supports(version)
        flexible = supported and api.flexible(version)  # type: ignore[union-attr]
        if supported:
            _FLEXIBLE[api_key << 16 | version] = flexible
    pos = _HEAD_ID.size + n
    if n >= 0 and pos <= size:  # the usual client id, whole (else read_string says why)
        try:
            client_id: str | None = str(frame[_HEAD_ID.size : pos], "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("a string field is not UTF-8") from None
    else:
        client_id, pos = read_string(frame, _HEAD.size, False)
    if flexible:
        # the usual empty tagged-field section is one zero byte
        pos = pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tags(frame, pos)
    return RequestHeader(api_key, version, correlation_id, client_id, flexible, supported, pos)


def response_frame(header: RequestHeader, body: Out) -> list:
    """The chunks of a response: size, header, then the body's chunks (bytes and deferred
    record slices)."""
    head = bytearray(_SIZE.pack(0))
    head += _SIZE.pack(header.correlation_id)
    if header.flexible and header.api_key != apis.API_VERSIONS:
        head.append(0)  # response header v1: no tagged fields
    _SIZE.pack_into(head, 0, len(head) - 4 + body.size)
    chunks = body.chunks()
    chunks[0] = bytes(head) + chunks[0]
    return chunks


def encoded_frame(header: RequestHeader, chunks: list, size: int) -> list:
    """A response whose body is already encoded (``chunks`` of ``size`` bytes in all, the
    first one bytes), framed."""
    flexible = header.flexible and header.api_key != apis.API_VERSIONS
    head = (
        _HEAD_V1.pack(size + 5, header.correlation_id, 0)
        if flexible
        else (_HEAD_V0.pack(size + 4, header.correlation_id))
    )
    return [head + chunks[0], *chunks[1:]] if len(chunks) > 1 else [head + chunks[0]]


def encode_response(header: RequestHeader, body: dict) -> list:
    """Encode ``body`` as the response to ``header``'s request, framed."""
    codec = apis.response_codec(header.api_key, header.api_version)
    return response_frame(header, codec.encode_new(body))


def decode_request(header: RequestHeader, frame) -> dict:
    """Decode a request body. Bytes after the message are ignored, as Kafka's broker does:
    librdkafka's all-topics Metadata v9+ request carries three padding bytes after its
    (varint) null topic array."""
    codec = apis.request_codec(header.api_key, header.api_version)
    body = memoryview(frame)[header.body_offset :]
    return codec.decode(body, 0)[0]
