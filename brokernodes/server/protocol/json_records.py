"""JSON produce bodies -> records, and decoded records -> JSON fetch answers (pure).

Shapes follow Confluent REST Proxy v3 (see docs/data-plane-api.md). Every parse error is an
``InvalidRequestError`` whose message names the offending field (``entries[3].value.data``):
malformed JSON as such (Confluent's 400), JSON that breaks the record schema (an unknown or
ill-typed field, an empty body) as an ``InvalidPayloadError`` (Confluent's 422).
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from brokernodes.errors import InvalidRequestError, SluiceError
from brokernodes.records.batch import DecodedRecord, decode_batch
from brokernodes.records.header import BatchHeader, read_header

DATA_TYPES = ("JSON", "STRING", "BINARY")
MAX_BATCH_ENTRIES = 1000
FORMATS = ("json", "text", "base64")
_RECORD_FIELDS = {"id", "partition_id", "key", "value", "headers", "timestamp"}


class InvalidPayloadError(InvalidRequestError):
    """JSON that parses but is not the record shape: Sluice's INVALID_REQUEST, answered
    422 on Confluent's routes as Confluent does (``protocol.confluent``)."""

    confluent_status = 422


class EmptyPayloadError(InvalidPayloadError):
    """No body where one is required (Confluent's 42206, "data is required")."""

    confluent_code = 42206


@dataclass(slots=True)
class ProduceEntry:
    """One record to produce, parsed and serialized to bytes."""

    id: str | None
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None  # epoch ms; None = the broker's clock
    key_type: str | None
    value_type: str | None


def b64decode(text: Any, where: str) -> bytes:
    """Strict standard base64 (padding required, no stray characters)."""
    if not isinstance(text, str):
        raise InvalidPayloadError(f"{where}: expected a base64 string, got {_kind(text)}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidPayloadError(f"{where}: not valid base64") from None


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


_TYPED_FIELDS = frozenset({"type", "data"})


def _typed_data(obj: Any, parent: str, field: str) -> tuple[bytes | None, str | None]:
    """``{"type", "data"}`` -> (bytes or None, type). Errors name ``parent.field`` (built
    only for an error: this runs twice per produced record)."""
    if obj is None:
        return None, None
    if not isinstance(obj, dict):
        raise InvalidPayloadError(f'{parent}.{field}: expected an object {{"type", "data"}}')
    if not obj.keys() <= _TYPED_FIELDS:
        extra = ", ".join(sorted(set(obj) - _TYPED_FIELDS))
        raise InvalidPayloadError(f"{parent}.{field}: unknown field(s) {extra}")
    kind = obj.get("type", "JSON")
    if kind not in DATA_TYPES:
        raise InvalidPayloadError(f"{parent}.{field}.type: must be one of {', '.join(DATA_TYPES)}")
    data = obj.get("data")
    if data is None:
        return None, kind
    if kind == "STRING":
        if not isinstance(data, str):
            raise InvalidPayloadError(f"{parent}.{field}.data: type STRING needs a string")
        return data.encode("utf-8", "surrogatepass"), kind
    if kind == "JSON":
        try:
            return orjson.dumps(data), kind
        except TypeError as e:  # e.g. integers beyond 64 bits
            raise InvalidPayloadError(
                f"{parent}.{field}.data: cannot be written as JSON: {e}"
            ) from None
    return b64decode(data, f"{parent}.{field}.data"), kind


def parse_timestamp(value: Any, where: str) -> int | None:
    """RFC 3339 string or epoch milliseconds -> epoch ms."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidPayloadError(f"{where}: expected RFC 3339 text or epoch milliseconds")
    if isinstance(value, int):
        if not 0 <= value < 2**63:
            raise InvalidPayloadError(f"{where}: epoch milliseconds must be >= 0")
        return value
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidPayloadError(
                f"{where}: {value!r} is not RFC 3339 (e.g. 2026-11-23T12:00:00.000Z)"
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms = int(dt.timestamp() * 1000)
        if ms < 0:
            raise InvalidPayloadError(f"{where}: timestamps before 1970 are not supported")
        return ms
    raise InvalidPayloadError(f"{where}: expected RFC 3339 text or epoch milliseconds")


def format_timestamp(ms: int) -> str | None:
    """Epoch ms -> RFC 3339 UTC with milliseconds; None for no timestamp (-1).

    Called once per record in produce answers (a batch's records mostly share a second), so
    the seconds part is cached: formatting a datetime per record was ~15% of the broker's
    time on JSON batch produce."""
    if ms < 0:
        return None
    seconds, millis = divmod(ms, 1000)
    return f"{_rfc3339_second(seconds)}.{millis:03d}Z"


@functools.lru_cache(maxsize=1024)
def _rfc3339_second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _headers(value: Any, where: str) -> tuple[tuple[str, bytes | None], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidPayloadError(f"{where}: expected a list of {{name, value}} objects")
    out = []
    for i, h in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(h, dict) or not isinstance(h.get("name"), str):
            raise InvalidPayloadError(f'{w}: expected {{"name": <string>, "value": <base64>}}')
        v = h.get("value")
        out.append((h["name"], None if v is None else b64decode(v, f"{w}.value")))
    return tuple(out)


def parse_entry(obj: Any, where: str = "body", *, entry_id: str | None = None) -> ProduceEntry:
    """One JSON record (the body of ``/records`` or one ``entries[i]``)."""
    if not isinstance(obj, dict):
        raise InvalidPayloadError(f"{where}: expected a JSON object, got {_kind(obj)}")
    if not obj.keys() <= _RECORD_FIELDS:
        unknown = ", ".join(sorted(set(obj) - _RECORD_FIELDS))
        raise InvalidPayloadError(f"{where}: unknown field(s) {unknown}")
    partition = obj.get("partition_id")
    if partition is not None and (
        not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
    ):
        raise InvalidPayloadError(f"{where}.partition_id: expected a partition number >= 0")
    key, key_type = _typed_data(obj.get("key"), where, "key")
    value, value_type = _typed_data(obj.get("value"), where, "value")
    headers = obj.get("headers")
    ts = obj.get("timestamp")
    return ProduceEntry(
        id=entry_id,
        partition=partition,
        key=key,
        value=value,
        headers=() if headers is None else _headers(headers, f"{where}.headers"),
        timestamp=None if ts is None else parse_timestamp(ts, f"{where}.timestamp"),
        key_type=key_type,
        value_type=value_type,
    )


def parse_json(body: bytes) -> Any:
    """Bytes -> JSON value; ``InvalidRequestError`` with the parser's position otherwise."""
    if not body:
        raise EmptyPayloadError("body: empty; expected a JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidRequestError(f"body: malformed JSON: {e}") from None


def parse_batch(doc: Any) -> tuple[list[ProduceEntry], list[tuple[str, InvalidRequestError]]]:
    """``{"entries": [...]}`` -> (good entries, [(id, error)] for entries that fail to parse).

    A body that is not of this shape at all raises; one bad entry only fails that entry.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise InvalidPayloadError('body: expected {"entries": [<record>, ...]}')
    entries = doc["entries"]
    if not entries:
        raise InvalidPayloadError("entries: at least one entry is needed")
    if len(entries) > MAX_BATCH_ENTRIES:
        raise InvalidPayloadError(
            f"entries: {len(entries)} entries, at most {MAX_BATCH_ENTRIES} per request"
        )
    ids = [_entry_id(obj, i) for i, obj in enumerate(entries)]
    good: list[ProduceEntry] = []
    bad: list[tuple[str, InvalidRequestError]] = []
    seen: set[str] = set()
    for i, (obj, entry_id) in enumerate(zip(entries, ids, strict=True)):
        try:
            if entry_id in seen:
                raise InvalidPayloadError(f"entries[{i}].id: {entry_id!r} is used twice")
            seen.add(entry_id)
            good.append(parse_entry(obj, f"entries[{i}]", entry_id=entry_id))
        except InvalidRequestError as e:
            bad.append((entry_id, e))
    return good, bad


def _entry_id(obj: Any, i: int) -> str:
    """An entry's required ``id`` (a string, or an integer taken as its decimal text).

    Confluent's batch schema requires it: without it a failure could not be told apart
    from the others, so an entry without one refuses the whole request, before anything
    is appended."""
    raw = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(raw, str) and raw:
        return raw
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    raise InvalidPayloadError(
        f"entries[{i}].id: required, a non-empty string unique within the request "
        "(failures are reported by it)"
    )


# --- fetch rendering ------------------------------------------------------------------------


WRITABLE_JSON_DEPTH = 254  # orjson reads 1024 levels of nesting but writes only 254


def loads_writable(data: bytes) -> Any:
    """``orjson.loads``, refusing (``JSONDecodeError``) a value nested too deeply for an
    answer to hold it: such a stored value must not make every fetch of it a 500. Only a
    value with that many brackets at all is written back to find out."""
    value = orjson.loads(data)
    if data.count(b"[") + data.count(b"{") > WRITABLE_JSON_DEPTH:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError as e:
            raise orjson.JSONDecodeError(f"nested too deeply: {e}", "", 0) from None
    return value


def render_data(data: bytes | None, fmt: str) -> tuple[Any, str | None]:
    """Bytes -> (JSON value, how it was rendered) for ``format=json|text|base64``."""
    if data is None:
        return None, None
    if fmt == "json":
        try:
            return loads_writable(data), "json"
        except orjson.JSONDecodeError:
            fmt = "text"
    if fmt == "text":
        try:
            return data.decode("utf-8"), "text"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), "base64"


def render_records(
    records: Iterable[DecodedRecord], fmt: str, timestamp_type: int = 0
) -> list[dict[str, Any]]:
    """Decoded records -> the JSON fetch ``records`` list."""
    ts_type = "LOG_APPEND_TIME" if timestamp_type else "CREATE_TIME"
    out = []
    for r in records:
        key, key_format = render_data(r.key, fmt)
        value, value_format = render_data(r.value, fmt)
        out.append(
            {
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestamp_type": ts_type,
                "key": key,
                "key_format": key_format,
                "value": value,
                "value_format": value_format,
                "headers": [
                    {
                        "name": name,
                        "value": None if v is None else base64.b64encode(v).decode("ascii"),
                    }
                    for name, v in r.headers
                ],
            }
        )
    return out


def render_batches(
    raw: bytes,
    offset: int,
    fmt: str,
    *,
    max_records: int | None = None,
    max_records_bytes: int | None = None,
    min_timestamp: int | None = None,
    skip: Callable[[BatchHeader], bool] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Whole fetched batches -> (JSON records from ``offset`` on, next offset to read).

    Control batches, and those ``skip`` names (an aborted transaction's), are skipped;
    records below ``offset`` (the first batch may start before it) are left out; with
    ``max_records`` the answer stops early and the next offset is the record after the
    last one rendered. ``min_timestamp`` also leaves out records before the first one
    stamped at or after it (a start by timestamp).

    A batch that cannot be decoded (corrupt, or inflating past ``max_records_bytes``; None
    means the codec's default cap) ends the answer before it, or raises an error naming its
    offsets when it comes first.
    """
    out: list[dict[str, Any]] = []
    next_offset = offset
    pos = 0
    while pos < len(raw) and (max_records is None or len(out) < max_records):
        try:
            batch = decode_batch(raw, pos, verify_crc=False, max_records_bytes=max_records_bytes)
        except SluiceError as e:
            if out:  # answer what came before it; the next fetch starts at this batch
                return out, next_offset
            h = read_header(raw, pos)
            raise type(e)(
                f"the batch at offsets {h.base_offset}-{h.last_offset} cannot be read as "
                f"records: {e.message}. Fetch it in binary, or skip it with "
                f"offset={h.next_offset}"
            ) from e
        h = batch.header
        pos += h.size
        if h.is_control or (skip is not None and skip(h)):
            next_offset = max(next_offset, h.next_offset)
            continue
        wanted = [r for r in batch.records if r.offset >= offset]
        if min_timestamp is not None:
            first = next((i for i, r in enumerate(wanted) if r.timestamp >= min_timestamp), None)
            if first is not None:
                wanted = wanted[first:]
                min_timestamp = None
            else:
                wanted = []
        if max_records is not None and len(wanted) > max_records - len(out):
            wanted = wanted[: max_records - len(out)]
            out.extend(render_records(wanted, fmt, h.timestamp_type))
            return out, wanted[-1].offset + 1
        out.extend(render_records(wanted, fmt, h.timestamp_type))
        next_offset = max(next_offset, h.next_offset)
    return out, next_offset


def typed_size(data: bytes | None, kind: str | None) -> Mapping[str, Any] | None:
    """``{"type", "size"}`` for a produce answer; None when there was no key/value."""
    if kind is None:
        return None
    return {"type": kind, "size": 0 if data is None else len(data)}
