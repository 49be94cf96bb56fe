"""The WebSocket streams' messages (pure): parsing client frames and connect parameters.

See the "WebSocket streams" section of docs/data-plane-api.md for the protocol. Every parse
error is an ``InvalidRequestError`` naming the field; produce errors carry the request id
they belong to (``RequestError.request_id``) so the answer can name it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from brokernodes.errors import InvalidRequestError
from brokernodes.server.protocol.isolation import read_committed_param
from brokernodes.server.protocol.json_records import MAX_BATCH_ENTRIES, ProduceEntry, parse_entry
from brokernodes.server.protocol.params import choice_param, int_param

CONSUME_FORMATS = ("json", "text", "base64", "binary")
MAX_CREDIT_GRANT = 2**40  # one grant; outstanding credit is capped at MAX_OUTSTANDING_CREDIT
MAX_OUTSTANDING_CREDIT = 2**50
_PRODUCE_FIELDS = {"id", "topic", "partition", "records"}


class RequestError(InvalidRequestError):
    """A produce request that cannot be parsed; ``request_id`` is its id (None if unknown)."""

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class ProtocolViolation(InvalidRequestError):
    """A frame the stream cannot go on after (not JSON, not an object): closed with 1008."""


@dataclass(slots=True)
class ProduceRequest:
    id: str | int
    topic: str
    entries: list[ProduceEntry]


# A binary produce frame: this header, the topic name (UTF-8), then one or more RecordBatch v2
# batches back to back (what the binary HTTP produce takes as its body). The SDK writes it
# (brokernodes.client.produce_stream.encode_binary_produce_header).
BINARY_PRODUCE_VERSION = 1
BINARY_PRODUCE_HEADER = struct.Struct(">BQiH")  # version, request id, partition, topic length
MAX_TOPIC_BYTES = 1024
MAX_BINARY_HEADER_BYTES = BINARY_PRODUCE_HEADER.size + MAX_TOPIC_BYTES


@dataclass(slots=True)
class BinaryProduceRequest:
    id: int
    topic: str
    partition: int
    batches: bytearray  # rewritten in place by the append (base offsets, leader epoch)


def parse_binary_produce(data: bytes) -> BinaryProduceRequest:
    """A binary frame -> ``BinaryProduceRequest``. A frame too short for its header or of
    another version is a ``ProtocolViolation`` (its request id cannot be trusted); a bad
    topic, partition or empty batches is a ``RequestError`` naming the request id."""
    size = BINARY_PRODUCE_HEADER.size
    if len(data) < size:
        raise ProtocolViolation(
            f"a binary produce frame is at least {size} bytes (version, request id, "
            f"partition, topic length), got {len(data)}"
        )
    version, request_id, partition, topic_len = BINARY_PRODUCE_HEADER.unpack_from(data)
    if version != BINARY_PRODUCE_VERSION:
        raise ProtocolViolation(
            f"binary produce frame version {version} is not supported (this broker speaks "
            f"version {BINARY_PRODUCE_VERSION})"
        )
    end = size + topic_len
    if topic_len == 0 or topic_len > MAX_TOPIC_BYTES or end > len(data):
        raise RequestError("topic: the frame's topic name is empty or cut short", request_id)
    try:
        topic = bytes(data[size:end]).decode()
    except UnicodeDecodeError:
        raise RequestError("topic: the topic name is not UTF-8", request_id) from None
    if partition < 0:
        raise RequestError("partition: expected a partition number >= 0", request_id)
    if end == len(data):
        raise RequestError(
            "batches: none; send one or more RecordBatch v2 batches after the topic name",
            request_id,
        )
    return BinaryProduceRequest(request_id, topic, partition, bytearray(memoryview(data)[end:]))


def load_frame(data: bytes | str) -> Any:
    """A text frame -> JSON value; ``ProtocolViolation`` when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ProtocolViolation(f"a text frame is not valid JSON: {e}") from None


def auth_token(doc: Any) -> str | None:
    """``{"auth": "<api key>"}`` -> the key; None when the frame is not an auth message."""
    if isinstance(doc, dict) and set(doc) == {"auth"} and isinstance(doc["auth"], str):
        return doc["auth"]
    return None


def parse_produce_request(doc: Any) -> ProduceRequest:
    """``{"id", "topic", "partition"?, "records": [...]}`` -> a ``ProduceRequest``."""
    if not isinstance(doc, dict):
        raise ProtocolViolation(
            'a produce frame must be a JSON object {"id", "topic", "partition"?, "records"}'
        )
    request_id = doc.get("id")
    if request_id is None or isinstance(request_id, bool):
        raise RequestError('id: every request needs an "id" (a string or an integer)')
    if not isinstance(request_id, str | int):
        raise RequestError("id: must be a string or an integer")
    unknown = set(doc) - _PRODUCE_FIELDS
    if unknown:
        raise RequestError(f"unknown field(s) {', '.join(sorted(unknown))}", request_id)
    topic = doc.get("topic")
    if not isinstance(topic, str) or not topic:
        raise RequestError("topic: expected a topic name", request_id)
    partition = doc.get("partition")
    if partition is not None and (
        not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
    ):
        raise RequestError("partition: expected a partition number >= 0", request_id)
    records = doc.get("records")
    if not isinstance(records, list) or not records:
        raise RequestError("records: expected a non-empty list of records", request_id)
    if len(records) > MAX_BATCH_ENTRIES:
        raise RequestError(
            f"records: {len(records)} records, at most {MAX_BATCH_ENTRIES} per request",
            request_id,
        )
    entries = []
    try:
        for i, obj in enumerate(records):
            entry = parse_entry(obj, f"records[{i}]")
            if entry.partition is None:
                entry.partition = partition
            entries.append(entry)
    except InvalidRequestError as e:
        raise RequestError(e.message, request_id) from None
    return ProduceRequest(request_id, topic, entries)


def parse_credit(doc: Any) -> int:
    """``{"credit": BYTES}`` -> BYTES (0..2^40); anything else is a protocol violation."""
    if not isinstance(doc, dict) or set(doc) != {"credit"}:
        raise ProtocolViolation(
            'the consume stream accepts only {"credit": <bytes>} messages from the client'
        )
    credit = doc["credit"]
    if not isinstance(credit, int) or isinstance(credit, bool) or credit < 0:
        raise ProtocolViolation("credit: expected a number of bytes >= 0")
    if credit > MAX_CREDIT_GRANT:
        raise ProtocolViolation(f"credit: at most {MAX_CREDIT_GRANT} bytes per grant")
    return credit


@dataclass(frozen=True, slots=True)
class ConsumeParams:
    topic: str
    partition: int
    start: str  # "offset" | "timestamp" | "earliest" | "latest"
    value: int  # the offset or timestamp (0 for earliest/latest)
    format: str
    max_bytes: int  # batch bytes per message at most (the first batch is sent whole)
    read_committed: bool = False  # isolation=read_committed: below the LSO, no aborted data


def parse_consume_query(
    query: Mapping[str, str], *, default_max_bytes: int, max_fetch_bytes: int
) -> ConsumeParams:
    """``topic``, ``partition`` (default 0), one of ``offset`` / ``timestamp`` /
    ``from=earliest|latest`` (default latest), ``format``, ``max_bytes``, ``isolation``."""
    topic = query.get("topic", "")
    if not topic:
        raise InvalidRequestError("query parameter 'topic' is required")
    partition = int_param(query, "partition", 0, minimum=0)
    given = [name for name in ("offset", "timestamp", "from") if query.get(name)]
    if len(given) > 1:
        raise InvalidRequestError(
            "give one start position: offset=N, timestamp=<epoch ms> or from=earliest|latest"
        )
    if given == ["offset"]:
        start, value = "offset", int_param(query, "offset", minimum=0)
    elif given == ["timestamp"]:
        start, value = "timestamp", int_param(query, "timestamp", minimum=0)
    else:
        start, value = choice_param(query, "from", ("earliest", "latest"), "latest"), 0
    fmt = choice_param(query, "format", CONSUME_FORMATS, "json")
    max_bytes = int_param(query, "max_bytes", default_max_bytes, minimum=1, maximum=max_fetch_bytes)
    read_committed = read_committed_param(query)
    return ConsumeParams(topic, partition, start, value, fmt, max_bytes, read_committed)
