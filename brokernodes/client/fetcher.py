"""The consumer's fetcher (Kafka's ``Fetcher``): one fetch task per assigned partition.

Each task keeps one binary fetch outstanding (``GET .../batches?offset=&max_wait_ms=``, a
long poll), or with ``fetch_mode="websocket"`` holds a ``/ws/consume`` stream whose pushes
it takes within the byte credit it grants. Fetched batches are checked (length, CRC) and
queued undecoded in the partition's ``pending``; ``poll`` decodes them one batch at a time as
it hands records out (Kafka's ``CompletedFetch``), so a partition revoked or sought away
from never costs the decoding of what was fetched ahead, and the records alive at once stay
about one batch per partition (the garbage collector's work grows with them). Fetching waits
while a partition holds ``max_buffered_bytes`` of fetched batches.
A fetch outside the log resets the fetch position per ``auto_offset_reset``, retriable
errors back off (refreshing metadata) and retry, and any other error stops the partition
until a seek (``poll`` raises it).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from typing import Any, NamedTuple
from urllib.parse import quote

import aiohttp
import orjson

from brokernodes.client.metadata import TopicPartition
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientTimeoutError,
    SluiceError,
)
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import LOG_OVERHEAD, peek_batch_size, validate_batch

__all__ = ["ConsumerRecord", "Fetcher"]

log = logging.getLogger("brokernodes.client.consumer")

WS_CONSUME_PATH = "/sluice/v1/ws/consume"
# Error codes the consume stream sends that HTTP would answer with a 5xx (so: retriable).
_WS_SERVER_ERRORS = frozenset({"UNKNOWN_SERVER_ERROR", "KAFKA_STORAGE_ERROR"})


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _partition_path(tp: TopicPartition, what: str) -> str:
    return f"/sluice/v1/topics/{quote(tp.topic, safe='')}/partitions/{tp.partition}/{what}"


class _PartitionState:
    __slots__ = (
        "buffer",
        "buffer_size",
        "buffered_bytes",
        "error",
        "fetch_offset",
        "high_watermark",
        "log_start_offset",
        "pending",
        "position",
        "room",
        "task",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position: int | None = None  # next offset poll returns; None: reset first
        self.fetch_offset: int | None = None  # next offset to fetch (>= position)
        # the records of the batch being handed out, decoded; its size in bytes
        self.buffer: deque[ConsumerRecord] = deque()
        self.buffer_size = 0
        # fetched data batches not decoded yet: (body, position, size, first wanted offset)
        self.pending: deque[tuple[bytes, int, int, int]] = deque()
        self.buffered_bytes = 0  # bytes of the batches in ``pending`` and ``buffer``
        self.high_watermark: int | None = None
        self.log_start_offset: int | None = None
        self.error: BaseException | None = None
        self.task: asyncio.Task | None = None
        self.room = asyncio.Event()


ABORTED_HEADER = "Sluice-Aborted-Transactions"


def parse_aborted(value: str | None) -> dict[int, list[tuple[int, int]]]:
    """The ``Sluice-Aborted-Transactions`` header (``pid:first:last`` comma-separated) as
    producer id -> [(first offset, ABORT marker offset)]."""
    out: dict[int, list[tuple[int, int]]] = {}
    if not value:
        return out
    for item in value.split(","):
        pid, first, last = (int(x) for x in item.split(":"))
        out.setdefault(pid, []).append((first, last))
    return out


class Fetcher:
    """The fetching methods of ``AsyncConsumer`` (its base class).

    They use the consumer's state: the assigned partitions' ``_PartitionState``, the
    configuration, the transport, the metadata (``refresh_metadata``), the position reset
    (``_reset``, ``_list_offset``) and the event ``poll`` waits on (``_data``).
    """

    isolation_level = "read_uncommitted"

    @property
    def _isolation_params(self) -> dict[str, str]:
        """The query parameter of a read_committed consumer's fetches and offset lookups."""
        if self.isolation_level == "read_committed":
            return {"isolation": "read_committed"}
        return {}

    def _start_fetcher(self, state: _PartitionState) -> None:
        state.task = asyncio.get_running_loop().create_task(
            self._fetch_loop(state), name=f"sluice-fetch-{state.tp.topic}-{state.tp.partition}"
        )

    async def _stop_fetchers(self, states: list[_PartitionState]) -> None:
        tasks = [s.task for s in states if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _leader_url(self, tp: TopicPartition) -> str:
        metadata = self._metadata
        assert metadata is not None
        url = metadata.leader_url(tp.topic, tp.partition)
        if url is None:
            if tp.topic not in metadata.topics:
                metadata.topic(tp.topic)
            raise BrokerError(
                "LEADER_NOT_AVAILABLE",
                f"partition {tp.topic}-{tp.partition} has no leader in metadata",
            )
        return url

    async def _backoff(self, attempt: int, refresh: bool) -> None:
        delay = min(1.0, self.retry_backoff_s * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        await asyncio.sleep(delay)
        if refresh:
            try:
                await self.refresh_metadata()
            except SluiceError as exc:
                log.info("consumer: metadata refresh failed: %s", exc)

    async def _fetch_loop(self, state: _PartitionState) -> None:
        try:
            if self.fetch_mode == "websocket":
                await self._fetch_ws(state)
            else:
                await self._fetch(state)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # e.g. the reset after OFFSET_OUT_OF_RANGE failed
            self._fail(state, exc)

    async def _fetch(self, state: _PartitionState) -> None:
        tp = state.tp
        attempt = 0
        params = {
            "max_bytes": str(self.fetch_max_bytes),
            "max_wait_ms": str(self.fetch_max_wait_ms),
            "min_bytes": str(self.fetch_min_bytes),
            **self._isolation_params,
        }
        path = _partition_path(tp, "batches")
        while True:
            try:
                if state.fetch_offset is None:
                    await self._reset(state)
                while state.buffered_bytes >= self.max_buffered_bytes:
                    state.room.clear()
                    await state.room.wait()
                params["offset"] = str(state.fetch_offset)
                response = await self._transport.request(
                    "GET", self._leader_url(tp) + path, params=params
                )
                attempt = 0
            except asyncio.CancelledError:
                raise
            except BrokerError as exc:
                if exc.error_code == "OFFSET_OUT_OF_RANGE":
                    if self.auto_offset_reset == "none":
                        self._fail(state, exc)
                        return
                    log.info(
                        "consumer: %s-%s offset %s out of range; resetting to %s",
                        tp.topic,
                        tp.partition,
                        state.fetch_offset,
                        self.auto_offset_reset,
                    )
                    result = await self._list_offset(tp, self.auto_offset_reset)
                    state.fetch_offset = result.offset
                    if not state.buffer and not state.pending:
                        state.position = result.offset
                    continue
                if not exc.retriable:
                    self._fail(state, exc)
                    return
                attempt += 1
                self._log_retry(tp, attempt, exc)
                await self._backoff(attempt, refresh=True)
                continue
            except (BrokerConnectionError, ClientTimeoutError) as exc:
                # Like Kafka's consumer: keep trying (a broker restart, a leader move).
                attempt += 1
                self._log_retry(tp, attempt, exc)
                await self._backoff(attempt, refresh=True)
                continue
            except SluiceError as exc:
                self._fail(state, exc)
                return
            headers = response.headers
            hw = headers.get("Sluice-High-Watermark")
            if hw is not None:
                state.high_watermark = int(hw)
            start = headers.get("Sluice-Log-Start-Offset")
            if start is not None:
                state.log_start_offset = int(start)
            body = response.body
            if body:
                try:
                    aborted = parse_aborted(headers.get(ABORTED_HEADER))
                    added = self._add_records(state, body, aborted)
                except SluiceError as exc:
                    self._fail(state, exc)
                    return
                if added:
                    self._data.set()

    # --- fetching over the WebSocket consume stream (fetch_mode="websocket") ---------------

    async def _fetch_ws(self, state: _PartitionState) -> None:
        """One ``/ws/consume`` stream per partition (``format=binary``): the broker pushes
        batches as they are appended, within the credit this side grants. The credit window
        is ``max_buffered_bytes``: each frame's bytes are granted again at once while the
        partition's buffer has room, else when ``poll`` makes room. A stream that ends or
        breaks is reopened at the next offset after a backoff."""
        tp = state.tp
        attempt = 0
        while True:
            ws = None
            progress = [0]
            try:
                if state.fetch_offset is None:
                    await self._reset(state)
                while state.buffered_bytes >= self.max_buffered_bytes:
                    state.room.clear()
                    await state.room.wait()
                params = {
                    "topic": tp.topic,
                    "partition": str(tp.partition),
                    "offset": str(state.fetch_offset),
                    "format": "binary",
                    "max_bytes": str(self.fetch_max_bytes),
                    **self._isolation_params,
                }
                ws = await self._transport.websocket(self._leader_url(tp) + WS_CONSUME_PATH, params)
                await self._stream(state, ws, progress)
                error: BaseException = BrokerConnectionError(
                    f"the consume stream of {tp.topic}-{tp.partition} closed "
                    f"(close code {ws.close_code})"
                )
            except asyncio.CancelledError:
                raise
            except SluiceError as exc:
                error = exc
            finally:
                if ws is not None and not ws.closed:
                    await ws.close()
            if progress[0]:
                attempt = 0  # the stream delivered: this is a new failure, not a repeat
            next_attempt = await self._on_fetch_error(state, error, attempt)
            if next_attempt is None:
                return
            attempt = next_attempt

    async def _stream(self, state: _PartitionState, ws: Any, progress: list[int]) -> None:
        """Read one open stream until it ends (returns) or sends an error (raises it).

        Credit is given back in lumps of at least a quarter of the window (the broker still
        holds the rest), not after every frame: at a few records per frame a grant per frame
        would double the messages on the live tail's path."""
        window = max(1, self.max_buffered_bytes)
        lump = max(1, window // 4)
        owed = 0  # credit used by frames and not granted again yet
        room = state.room

        async def grant_when_room() -> None:
            nonlocal owed
            while True:
                room.clear()
                await room.wait()
                if owed >= lump and state.buffered_bytes < window:
                    grant, owed = owed, 0
                    await ws.send_str(f'{{"credit": {grant}}}')

        await ws.send_str(f'{{"credit": {window}}}')
        granter = asyncio.get_running_loop().create_task(grant_when_room())
        try:
            while True:
                msg = await ws.receive()
                kind = msg.type
                if kind == aiohttp.WSMsgType.BINARY:
                    data = msg.data
                    progress[0] += 1
                    if self._add_records(state, data):
                        self._data.set()
                    owed += len(data)
                    if owed >= lump and state.buffered_bytes < window:
                        grant, owed = owed, 0
                        await ws.send_str(f'{{"credit": {grant}}}')
                elif kind == aiohttp.WSMsgType.TEXT:
                    raise _stream_error(msg.data, state.tp)
                else:  # CLOSE, CLOSING, CLOSED, ERROR
                    return
        finally:
            granter.cancel()

    async def _on_fetch_error(
        self, state: _PartitionState, error: BaseException, attempt: int
    ) -> int | None:
        """What ``_fetch`` does with a failed fetch, for the stream: reset the position
        (OFFSET_OUT_OF_RANGE), back off and retry (retriable), or fail the partition (None)."""
        tp = state.tp
        if isinstance(error, BrokerError):
            if error.error_code == "OFFSET_OUT_OF_RANGE":
                if self.auto_offset_reset == "none":
                    self._fail(state, error)
                    return None
                log.info(
                    "consumer: %s-%s offset %s out of range; resetting to %s",
                    tp.topic,
                    tp.partition,
                    state.fetch_offset,
                    self.auto_offset_reset,
                )
                result = await self._list_offset(tp, self.auto_offset_reset)
                state.fetch_offset = result.offset
                if not state.buffer and not state.pending:
                    state.position = result.offset
                return attempt
            if not error.retriable:
                self._fail(state, error)
                return None
        elif not isinstance(error, BrokerConnectionError | ClientTimeoutError):
            self._fail(state, error)
            return None
        attempt += 1
        self._log_retry(tp, attempt, error)
        await self._backoff(attempt, refresh=True)
        return attempt

    def _fail(self, state: _PartitionState, error: BaseException) -> None:
        """Stop fetching ``state``'s partition; ``poll`` raises ``error`` until a seek."""
        state.error = error
        self._data.set()

    @staticmethod
    def _log_retry(tp: TopicPartition, attempt: int, error: BaseException) -> None:
        level = logging.WARNING if attempt in (3, 10) or attempt % 50 == 0 else logging.DEBUG
        log.log(level, "consumer: fetch %s-%s failed (attempt %d): %s", *tp, attempt, error)

    def _add_records(
        self,
        state: _PartitionState,
        body: bytes,
        aborted: dict[int, list[tuple[int, int]]] | None = None,
    ) -> int:
        """Queue fetched batches, checked (length, CRC) but not decoded, in the partition's
        ``pending``; control batches and the batches of ``aborted`` transactions (producer
        id -> [(first offset, marker offset)]) are left out but move the fetch offset past
        them. Returns how many batches were queued."""
        fetch_offset = state.fetch_offset
        assert fetch_offset is not None
        pending = state.pending
        queued = 0
        queued_bytes = 0
        pos = 0
        end = len(body)
        check_crcs = self.check_crcs
        while pos < end:
            size = peek_batch_size(body, pos)
            if size is None or pos + size > end or size < LOG_OVERHEAD:
                break  # a partial batch at the end of a size-capped fetch
            header = validate_batch(body, pos, verify_crc=check_crcs)
            next_offset = header.next_offset
            if next_offset > fetch_offset:
                if not header.is_control and not (
                    aborted
                    and header.is_transactional
                    and any(
                        first <= header.base_offset <= last
                        for first, last in aborted.get(header.producer_id, ())
                    )
                ):
                    pending.append((body, pos, size, fetch_offset))
                    queued += 1
                    queued_bytes += size
                fetch_offset = next_offset
            pos += size
        state.fetch_offset = fetch_offset
        state.buffered_bytes += queued_bytes
        return queued

    def _decode_next(self, state: _PartitionState) -> None:
        """Decode the partition's next pending batch into its (empty) buffer; records below
        the offset it was fetched for (a batch the position was inside of) are left out."""
        body, pos, size, first = state.pending.popleft()
        batch = decode_batch(
            body,
            pos,
            verify_crc=False,  # checked when it was queued
            record_type=ConsumerRecord,
            record_prefix=(state.tp.topic, state.tp.partition),
        )
        records = batch.records
        if batch.header.base_offset < first:
            records = [r for r in records if r.offset >= first]
        state.buffer.extend(records)
        state.buffer_size = size


def _stream_error(text: str, tp: TopicPartition) -> BrokerError:
    """A text frame on a binary consume stream: the broker's error, as ``BrokerError``."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("error_code"), str):
        return BrokerError(
            "UNKNOWN_SERVER_ERROR",
            f"unexpected text frame on the consume stream of {tp.topic}-{tp.partition}",
            status=500,
        )
    code = doc["error_code"]
    details = {k: v for k, v in doc.items() if k not in ("error_code", "message")}
    return BrokerError(
        code,
        str(doc.get("message") or code),
        status=500 if code in _WS_SERVER_ERRORS else None,
        details=details,
    )
