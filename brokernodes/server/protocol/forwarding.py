"""What forwarding to a partition's leader says, without I/O (docs/data-plane-api.md, "One
front door").

A broker that does not lead a partition forwards a REST or WebSocket call for it to the
leader. The request is marked with ``Sluice-Forwarded: <broker id>`` so that it is forwarded
at most once: a broker never forwards a request that carries the mark (stale metadata on
both sides answers the caller a retriable ``NOT_LEADER_OR_FOLLOWER`` instead of a loop).

Most calls go through whole (same path, query, body bytes). JSON records that were parsed
together with records for partitions this broker leads (a ``records:batch``, a WebSocket
produce request) are sent on as a sub-request that names each record's partition; this module
writes those sub-requests and reads the leader's answers back into per-record outcomes.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from brokernodes.errors import SluiceError
from brokernodes.server.protocol.json_records import ProduceEntry, parse_timestamp
from brokernodes.server.protocol.ws_frames import (
    BINARY_PRODUCE_HEADER,
    BINARY_PRODUCE_VERSION,
    BinaryProduceRequest,
)

FORWARDED_HEADER = "Sluice-Forwarded"
# request headers a forward carries on (the body's bytes go through as they came)
REQUEST_HEADERS = ("Authorization", "Content-Type", "Accept")
# answer headers passed back: the type, Retry-After, and every Sluice-* (offsets, throttle)
RESPONSE_HEADERS = ("Content-Type", "Retry-After")


class LeaderNotAvailableError(SluiceError):
    """The leader could not be reached and nothing was sent to it: retrying is safe."""

    error_code = "LEADER_NOT_AVAILABLE"


class ForwardOutcomeUnknownError(SluiceError):
    """The request reached the leader but its answer was lost (the leader failed or the
    connection broke): it may or may not have been applied. Retriable; an idempotent
    producer's retry is never stored twice."""

    error_code = "NETWORK_EXCEPTION"


def passed_back(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The leader's answer headers that the caller gets too."""
    out = {}
    for name, value in headers:
        if name in RESPONSE_HEADERS or (
            name.lower().startswith("sluice-") and name.lower() != FORWARDED_HEADER.lower()
        ):
            out[name] = value
    return out


def entry_json(entry: ProduceEntry, partition: int, entry_id: str | None = None) -> dict:
    """One parsed JSON record written back as a record object for the leader, with its
    partition fixed. Keys and values go as BINARY (base64 of the exact bytes parsed here), so
    the leader stores the same bytes whatever type the caller used; the caller's answer is
    built here from the parsed entry, so it never sees the difference."""
    obj: dict[str, Any] = {"partition_id": partition}
    if entry_id is not None:
        obj["id"] = entry_id
    if entry.key is not None:
        obj["key"] = {"type": "BINARY", "data": base64.b64encode(entry.key).decode()}
    obj["value"] = (
        None
        if entry.value is None
        else {"type": "BINARY", "data": base64.b64encode(entry.value).decode()}
    )
    if entry.headers:
        obj["headers"] = [
            {"name": n, "value": None if v is None else base64.b64encode(v).decode()}
            for n, v in entry.headers
        ]
    if entry.timestamp is not None:
        obj["timestamp"] = entry.timestamp
    return obj


@dataclass(slots=True)
class Outcome:
    """One forwarded record's outcome: an offset, or an error."""

    partition: int | None = None
    offset: int | None = None
    timestamp: int = -1
    error: SluiceError | None = None


def error_from(doc: Any, status: int, where: str) -> SluiceError:
    """The error a leader answered (its code and message; a body without one is named by
    the status)."""
    # Sluice's string code; on Confluent routes it is ``sluice_code`` beside Confluent's int
    code = doc.get("sluice_code") if isinstance(doc, Mapping) else None
    if code is None and isinstance(doc, Mapping):
        code = doc.get("error_code")
    if isinstance(code, str):
        err = SluiceError(str(doc.get("message") or code))  # type: ignore[union-attr]
        err.error_code = code
        skip = ("error_code", "sluice_code", "message", "id")
        details = {k: v for k, v in doc.items() if k not in skip}  # type: ignore[union-attr]
        if details:
            err.details = details  # type: ignore[attr-defined]
        return err
    if status >= 500 or status == 0:
        return ForwardOutcomeUnknownError(
            f"{where} answered HTTP {status} without an error body; the outcome is unknown: retry"
        )
    err = SluiceError(f"{where} answered HTTP {status}")
    err.error_code = "UNKNOWN_SERVER_ERROR"
    return err


def batch_outcomes(doc: Any, ids: list[str], status: int, where: str) -> dict[str, Outcome]:
    """A leader's ``records:batch`` answer (207 with ``successes`` and ``failures`` by id)
    -> an outcome for each id sent; an id the answer does not name fails with an unknown
    outcome (it may have been stored)."""
    if status != 207 or not isinstance(doc, Mapping):
        err = error_from(doc, status, where)
        return {i: Outcome(error=err) for i in ids}
    out: dict[str, Outcome] = {}
    for s in doc.get("successes") or ():
        ts = s.get("timestamp")
        out[str(s.get("id"))] = Outcome(
            partition=s.get("partition_id"),
            offset=s.get("offset"),
            timestamp=-1 if ts is None else (parse_timestamp(ts, "timestamp") or 0),
        )
    for f in doc.get("failures") or ():
        out[str(f.get("id"))] = Outcome(error=error_from(f, 500, where))
    for i in ids:
        if i not in out:
            out[i] = Outcome(
                error=ForwardOutcomeUnknownError(
                    f"{where} did not answer for entry {i!r}; its outcome is unknown: retry"
                )
            )
    return out


def stream_outcomes(doc: Mapping, count: int, where: str) -> list[Outcome]:
    """A leader's answer to a forwarded WebSocket produce request of ``count`` records
    (``offsets`` in record order, or an error for all)."""
    offsets = doc.get("offsets")
    if isinstance(offsets, list) and len(offsets) == count:
        out = []
        for o in offsets:
            if o.get("offset") is None:
                out.append(
                    Outcome(partition=o.get("partition_id"), error=error_from(o, 500, where))
                )
            else:
                out.append(Outcome(partition=o.get("partition_id"), offset=o["offset"]))
        return out
    err = error_from(doc, 500, where)
    return [Outcome(error=err) for _ in range(count)]


def binary_produce_frame(request: BinaryProduceRequest) -> bytes:
    """A binary produce frame as the client sent it (header, topic, batches), to send on."""
    topic = request.topic.encode()
    head = BINARY_PRODUCE_HEADER.pack(
        BINARY_PRODUCE_VERSION, request.id, request.partition, len(topic)
    )
    return b"".join((head, topic, request.batches))
