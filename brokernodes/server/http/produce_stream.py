"""Confluent's streaming produce mode for ``POST /v3/clusters/{c}/topics/{t}/records``.

A client may send several records in one request body, JSON objects back to back or one per
line, usually chunked (``Transfer-Encoding: chunked``) so that it can go on writing records
while answers come back. Each record is appended on its own, in order, and its answer (the
single-record answer, or an error body with Confluent's integer ``error_code``) is written
back as soon as it is appended, one JSON object per line.

The status line waits for the first record: if it fails, the request is answered with that
error as a single-record produce would be (so a one-record chunked request behaves as an
ordinary one); from the second record on, failures are answers in the stream and the
records after them are still appended. A body that stops being a sequence of JSON objects
ends the stream with an error answer (it cannot be resynchronised).

A chunked body is read and answered record by record (only aiohttp takes chunked bodies);
a body with ``Content-Length`` is whole already and its answers are written in one response
(this is also how a stream that fits the lean front's body limit arrives). The single-record
fast path does not change: a body is looked at as a stream only once it failed to parse as
one JSON value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from brokernodes.errors import RequestTimedOutError, SluiceError
from brokernodes.server.http.util import JSON
from brokernodes.server.protocol.confluent import confluent_error_body
from brokernodes.server.protocol.json_records import EmptyPayloadError
from brokernodes.server.protocol.json_stream import ObjectSplitter, split_objects

logger = logging.getLogger("sluice.broker.http")

# one record's bytes -> its answer (raises its error)
ProduceOne = Callable[[bytes], Awaitable[dict[str, Any]]]


def stream_of(body: bytes, max_record_bytes: int) -> list[bytes] | None:
    """The records of a whole body that holds more than one JSON object, else None (the
    body is then answered as the single record it claims to be)."""
    try:
        records = split_objects(body, max_record_bytes)
    except SluiceError:
        return None
    return records if len(records) > 1 else None


async def read_records(content: Any, max_record_bytes: int, timeout_s: float):
    """A chunked body's records as they arrive; each must arrive within ``timeout_s`` of
    the one before (a stream may last, a stalled one may not)."""
    splitter = ObjectSplitter(max_record_bytes)
    while True:
        try:
            async with asyncio.timeout(timeout_s):
                chunk = await content.readany()
        except TimeoutError:
            raise RequestTimedOutError(
                f"no streamed record arrived within {timeout_s:g} s; the stream is closed"
            ) from None
        if not chunk:
            splitter.close()
            return
        for record in splitter.feed(chunk):
            yield record


def _line(answer: dict[str, Any]) -> bytes:
    return orjson.dumps(answer) + b"\n"


def _error_line(error: SluiceError) -> bytes:
    _, body = confluent_error_body(error)
    return _line(body)


async def answer_records(records: list[bytes], produce_one: ProduceOne) -> web.Response:
    """A whole body's records, appended one by one; their answers in one response."""
    if not records:
        raise EmptyPayloadError("body: empty; expected a JSON object")
    lines = [_line(await produce_one(records[0]))]
    for raw in records[1:]:
        try:
            lines.append(_line(await produce_one(raw)))
        except SluiceError as e:
            lines.append(_error_line(e))
    return web.Response(body=b"".join(lines), status=200, content_type=JSON)


async def answer_stream(
    records: AsyncIterator[bytes], produce_one: ProduceOne
) -> web.StreamResponse:
    """A chunked body's records: the first appended here (its error is the request's), the
    rest while the answer streams (``StreamedAnswers``)."""
    first = await anext(records, None)
    if first is None:
        raise EmptyPayloadError("body: empty; expected a JSON object")
    return StreamedAnswers(_line(await produce_one(first)), records, produce_one)


class StreamedAnswers(web.StreamResponse):
    """The answers to a streamed body, written as each record is appended. aiohttp sends
    it with ``prepare`` (as it does its own ``FileResponse``); the records after the first
    are read and appended there, so the answer's end is the body's end."""

    def __init__(
        self, first: bytes, records: AsyncIterator[bytes], produce_one: ProduceOne
    ) -> None:
        super().__init__(status=200)
        self.content_type = JSON
        self._first = first
        self._records = records
        self._produce_one = produce_one

    async def prepare(self, request: web.BaseRequest):  # type: ignore[override]
        writer = await super().prepare(request)
        await self.write(self._first)
        while True:
            try:
                raw = await anext(self._records, None)
            except SluiceError as e:  # the body is no longer a record stream
                await self.write(_error_line(e))
                break
            if raw is None:
                break
            try:
                line = _line(await self._produce_one(raw))
            except SluiceError as e:
                line = _error_line(e)
            except Exception:  # answered, logged, and the stream ends: never a bare cut
                logger.exception("streamed produce failed: %s", request.path)
                await self.write(_error_line(SluiceError("unexpected broker error")))
                break
            await self.write(line)
        return writer
