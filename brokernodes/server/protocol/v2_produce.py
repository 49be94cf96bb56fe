"""Confluent REST Proxy v2 produce bodies and answers (pure).

``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{p}`` take
``{"records": [{"key", "value", "partition"}]}``, the embedded format named by the request's
Content-Type: ``application/vnd.kafka.binary.v2+json`` (key and value base64; also what a
plain ``application/vnd.kafka.v2+json`` or ``application/json`` body is read as, Confluent's
default format) or ``application/vnd.kafka.json.v2+json`` (key and value any JSON, stored as
its JSON text). Schema-based formats (Avro, JSON Schema, Protobuf) need a schema registry,
which Sluice does not have: their types are refused with 415 by the shell.

The answer is Confluent's: ``{"key_schema_id": null, "value_schema_id": null, "offsets":
[{"partition", "offset", "error_code", "error"}]}``, one offset per record in request order;
a record that was not appended has ``offset: null``, ``error_code`` 1 (not retriable) or 2
(retriable) and the reason in ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from brokernodes.server.protocol.confluent import JSON, V2, V2_BINARY, V2_JSON, retriable
from brokernodes.server.protocol.json_records import (
    InvalidPayloadError,
    ProduceEntry,
    b64decode,
)

CONSUMED = (V2_BINARY, V2_JSON, V2, JSON)
ANSWERED = (V2, JSON)
MAX_RECORDS = 1000
_SCHEMA_FIELDS = ("key_schema", "key_schema_id", "value_schema", "value_schema_id")
_TOP_FIELDS = frozenset({"records", *_SCHEMA_FIELDS})


def embedded_format(media_type: str | None) -> str:
    """``json`` for ``application/vnd.kafka.json.v2+json``, else ``binary``."""
    return "json" if media_type == V2_JSON else "binary"


def _data(value: Any, fmt: str, where: str) -> bytes | None:
    if value is None:
        return None
    if fmt == "json":
        try:
            return orjson.dumps(value)
        except TypeError as e:
            raise InvalidPayloadError(f"{where}: cannot be written as JSON: {e}") from None
    return b64decode(value, where)


def parse_records(doc: Any, fmt: str, *, partition: int | None) -> list[ProduceEntry]:
    """The body's records as entries; ``partition`` is the path's (records then name none)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise InvalidPayloadError('body: expected {"records": [{"key", "value"}, ...]}')
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise InvalidPayloadError(f"body: unknown field(s) {', '.join(sorted(unknown))}")
    if any(doc.get(f) is not None for f in _SCHEMA_FIELDS):
        raise InvalidPayloadError(
            "body: key/value schemas need a schema registry, which Sluice does not have; "
            "produce binary or json records"
        )
    records = doc["records"]
    if not records:
        raise InvalidPayloadError("records: at least one record is needed")
    if len(records) > MAX_RECORDS:
        raise InvalidPayloadError(
            f"records: {len(records)} records, at most {MAX_RECORDS} per request"
        )
    allowed = {"key", "value"} if partition is not None else {"key", "value", "partition"}
    out = []
    for i, rec in enumerate(records):
        where = f"records[{i}]"
        if not isinstance(rec, dict):
            raise InvalidPayloadError(f"{where}: expected an object {{key, value}}")
        unknown = set(rec) - allowed
        if unknown:
            raise InvalidPayloadError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        p = rec.get("partition", partition)
        if p is not None and (not isinstance(p, int) or isinstance(p, bool) or p < 0):
            raise InvalidPayloadError(f"{where}.partition: expected a partition number >= 0")
        out.append(
            ProduceEntry(
                id=str(i),
                partition=p,
                key=_data(rec.get("key"), fmt, f"{where}.key"),
                value=_data(rec.get("value"), fmt, f"{where}.value"),
                headers=(),
                timestamp=None,
                key_type=None,
                value_type=None,
            )
        )
    return out


def answer(results: Sequence[Any]) -> dict[str, Any]:
    """Confluent's v2 produce answer for the records' results (in request order)."""
    offsets = []
    for r in results:
        if r.error is None:
            offsets.append(
                {"partition": r.partition, "offset": r.offset, "error_code": None, "error": None}
            )
        else:
            offsets.append(
                {
                    "partition": r.partition,
                    "offset": None,
                    "error_code": 2 if retriable(r.error) else 1,
                    "error": r.error.message,
                }
            )
    return {"key_schema_id": None, "value_schema_id": None, "offsets": offsets}
