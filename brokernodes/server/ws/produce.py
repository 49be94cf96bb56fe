"""``GET /sluice/v1/ws/produce``: a produce stream, acknowledged per request id, in order.

Text frames carry JSON records (``parse_produce_request``); binary frames carry RecordBatch
v2 batches for one partition behind a small header (``parse_binary_produce``): the SDK's
low-latency path, one frame each way per request on an open connection instead of a whole
HTTP request. Both kinds may be mixed on one stream; answers are JSON text frames.

Two tasks per socket: the reader parses frames and starts each request's append at once
(so appends are pipelined, and enter each partition's append lock in the order sent); the
writer awaits them in order and answers each. With acks=1 a binary frame's append waits for
nothing but itself, so the reader runs it in place (one loop turn sooner than a task, on the
live tail's path) and is never cancelled half-way through it. ``InFlightWindow`` bounds what
is pending: when too many requests (or bytes) await their answers, the reader stops reading,
aiohttp stops reading the socket and TCP pushes back on the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from brokernodes.errors import (
    InvalidRequestError,
    NotLeaderOrFollowerError,
    SluiceError,
    UnauthenticatedError,
)
from brokernodes.server.http.forward import forwardable
from brokernodes.server.http.txn_produce import check_transactional
from brokernodes.server.protocol.params import acks_param
from brokernodes.server.protocol.responses import batch_outcomes, error_body
from brokernodes.server.protocol.ws_frames import (
    MAX_BINARY_HEADER_BYTES,
    BinaryProduceRequest,
    ProduceRequest,
    ProtocolViolation,
    RequestError,
    load_frame,
    parse_binary_produce,
    parse_produce_request,
)
from brokernodes.server.ws.socket import PeerGone, StreamSocket, close_after_error
from brokernodes.server.ws.upstream import UpstreamProduce, relay
from brokernodes.server.ws_registry import CLOSE_INTERNAL_ERROR, CLOSE_NORMAL, close_code_for

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.broker.ws")

MAX_IN_FLIGHT_REQUESTS = 32
MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024
END_DRAIN_TIMEOUT_S = 30.0  # on shutdown or revocation: answer what is in flight, then close

# Appends still running when their socket went away: kept referenced until they finish
# (an append is never cancelled half-way).
_detached: set[asyncio.Task] = set()


class InFlightWindow:
    """At most ``max_requests`` pending requests and ``max_bytes`` of their frames (one
    request is always let in, however large). One acquirer (the reader), one releaser."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.count = 0
        self.bytes = 0
        self._changed = asyncio.Event()

    def has_room(self, nbytes: int) -> bool:
        if self.count >= self.max_requests:
            return False
        return self.count == 0 or self.bytes + nbytes <= self.max_bytes

    async def acquire(self, nbytes: int) -> None:
        while not self.has_room(nbytes):
            self._changed.clear()
            await self._changed.wait()
        self.count += 1
        self.bytes += nbytes

    def release(self, nbytes: int) -> None:
        self.count -= 1
        self.bytes -= nbytes
        self._changed.set()


@dataclass(slots=True)
class _Pending:
    """One answer to send, in order: a running append (its task, or the future the reader
    resolves for one it runs in place), or an answer known already."""

    nbytes: int
    task: asyncio.Future[dict[str, Any]] | None = None
    answer: dict[str, Any] | None = None
    request_id: Any = None  # names the answer if the task fails unexpectedly


@dataclass(slots=True)
class _End:
    """Send what came before, then ``error`` (if any), then close with ``code``."""

    code: int | None
    error: SluiceError | None


def error_answer(request_id: Any, error: SluiceError) -> dict[str, Any]:
    return {"id": request_id, **error_body(error)}


class ProduceStream:
    def __init__(self, broker: Broker, sock: StreamSocket, acks: int) -> None:
        self.transactional_id: str | None = None
        self.broker = broker
        self.sock = sock
        self.acks = acks
        self.window = InFlightWindow(MAX_IN_FLIGHT_REQUESTS, MAX_IN_FLIGHT_BYTES)
        self.queue: asyncio.Queue[_Pending | _End] = asyncio.Queue()
        self.appends: set[asyncio.Task] = set()
        self._appending = False  # the reader is inside an acks=1 append
        # one front door: streams to other leaders, for partitions led there (ws/upstream.py)
        self.upstreams: UpstreamProduce | None = None
        self._stop_reading = False  # ... and is to stop after it

    async def run(self) -> None:
        sock = self.sock
        if sock.principal is None:
            try:
                await sock.authenticate_first_frame()
            except PeerGone:
                return
            except SluiceError as e:
                await close_after_error(sock, e)
                return
        reader = asyncio.create_task(self._read())
        writer = asyncio.create_task(self._write())
        ending = sock.session.ending
        try:
            done, _ = await asyncio.wait(
                (reader, writer, ending), return_when=asyncio.FIRST_COMPLETED
            )
            if ending in done or (reader in done and reader.result() == "stop"):
                if ending in done:
                    self._cancel_reader(reader)
                    code, error = ending.result()
                    self.queue.put_nowait(_End(code, error))
                # the writer answers what is in flight, then closes
                await asyncio.wait((writer,), timeout=END_DRAIN_TIMEOUT_S)
        finally:
            self._cancel_reader(reader)
            writer.cancel()
            for t in (reader, writer):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            for t in list(self.appends):
                if not t.done():
                    _detached.add(t)
                    t.add_done_callback(_detached.discard)
            if self.upstreams is not None:
                await self.upstreams.close()
            if not sock.ws.closed:  # the writer failed, or did not finish in time
                code = ending.result()[0] if ending.done() else CLOSE_INTERNAL_ERROR
                await sock.close(code)

    # --- reader ----------------------------------------------------------------------

    def _cancel_reader(self, reader: asyncio.Task) -> None:
        """Stop the reader, but not inside an append: it then stops right after it (an
        append is never cancelled half-way)."""
        if self._appending:
            self._stop_reading = True
        else:
            reader.cancel()

    async def _read(self) -> str:
        """Read frames until the peer goes (``"gone"``) or a frame ends the stream
        (``"stop"``: an ``_End`` is queued)."""
        ws = self.sock.ws
        while True:
            msg = await ws.receive()
            kind = msg.type
            if kind is WSMsgType.TEXT or kind is WSMsgType.BINARY:
                nbytes = len(msg.data)
                await self.window.acquire(nbytes)
                try:
                    if kind is WSMsgType.BINARY:
                        request = parse_binary_produce(msg.data)
                    else:
                        request = parse_produce_request(load_frame(msg.data))
                except RequestError as e:
                    self.queue.put_nowait(_Pending(nbytes, answer=error_answer(e.request_id, e)))
                    continue
                except ProtocolViolation as e:
                    self.window.release(nbytes)
                    self.queue.put_nowait(_End(None, e))
                    return "stop"
                if kind is WSMsgType.BINARY and self.acks == 1:
                    if await self._produce_in_place(request, nbytes):
                        continue
                    return "gone"
                if kind is WSMsgType.BINARY:
                    task = asyncio.create_task(self._produce_batches(request))
                else:
                    task = asyncio.create_task(self._produce(request))
                self.appends.add(task)
                task.add_done_callback(self.appends.discard)
                self.queue.put_nowait(_Pending(nbytes, task=task, request_id=request.id))
            else:  # close, closing, closed, or an error aiohttp closed the socket for
                return "gone"

    async def _produce_in_place(self, request: BinaryProduceRequest, nbytes: int) -> bool:
        """An acks=1 binary request appended by the reader itself, its answer in order in
        the writer's queue; False when the stream is ending (stop reading)."""
        answer = asyncio.get_running_loop().create_future()
        self.queue.put_nowait(_Pending(nbytes, task=answer, request_id=request.id))
        self._appending = True
        try:
            result = await self._produce_batches(request, in_place=True)
        except Exception as e:  # the writer answers UNKNOWN_SERVER_ERROR and logs it
            result = e
        finally:
            self._appending = False
        if isinstance(result, asyncio.Future):  # sent on to the leader: its answer, later
            relay(result, answer)
        elif not answer.done():  # a writer cancelled while it waited cancelled the future too
            if isinstance(result, Exception):
                answer.set_exception(result)
            else:
                answer.set_result(result)
        return not self._stop_reading

    async def _produce(self, request: ProduceRequest) -> dict[str, Any]:
        try:
            principal = self.sock.authorize("WRITE", request.topic)
            self.broker.quotas.check_storage(principal)
            results = await self.broker.produce_entries(
                request.topic, request.entries, acks=self.acks
            )
            if self.upstreams is not None:  # records for partitions led elsewhere
                await self.upstreams.produce_entries(request, results)
        except SluiceError as e:
            return error_answer(request.id, e)
        # the throttle delays this answer in the writer (answers stay in order): it is sent
        # no sooner than throttle ms after the record, so pipelined answers do not add up
        throttle = self.broker.quotas.produce(principal, entries_bytes(request.entries))
        answer = self._answer(request, results)
        if throttle:
            answer["throttle_time_ms"] = throttle
            answer[_NOT_BEFORE] = asyncio.get_running_loop().time() + throttle / 1000
        return answer

    async def _produce_batches(self, request: BinaryProduceRequest, *, in_place: bool = False):
        """A binary frame's batches appended to its partition, as the binary HTTP produce
        does; the answer carries the same fields as that endpoint's JSON body. A frame for a
        partition led elsewhere goes on to the leader: ``in_place``, the future of its
        answer is returned (the reader goes on reading), else the answer."""
        broker = self.broker
        topic = request.topic
        try:
            principal = self.sock.authorize("WRITE", topic)
            try:
                partition = broker.replicas.get_partition(topic, request.partition)
            except NotLeaderOrFollowerError:
                if self.upstreams is None:
                    raise
                sent = await self.upstreams.send_frame(request)
                return sent if in_place else await sent
            await check_transactional(
                broker,
                None,
                topic,
                partition,
                request.batches,
                self.transactional_id,
                authorization=self.sock.authorization,
                where="the WebSocket produce stream",
            )
            result = await broker.append_batches(
                principal, partition, topic, request.batches, acks=self.acks
            )
        except SluiceError as e:
            return error_answer(request.id, e)
        if not result.duplicate:
            # One loop turn before the answer: the consume streams this append woke push
            # the records first (the live tail's latency is what end to end measures; the
            # answer is not on that path).
            await asyncio.sleep(0)
        throttle = broker.quotas.produce(principal, len(request.batches))
        answer: dict[str, Any] = {
            "id": request.id,
            "base_offset": result.base_offset,
            "last_offset": result.last_offset,
            "log_append_time": result.log_append_time,
            "log_start_offset": result.log_start_offset,
            "duplicate": result.duplicate,
        }
        if result.batches is not None:
            answer["batches"] = batch_outcomes(result.batches)
        if throttle:
            answer["throttle_time_ms"] = throttle
            answer[_NOT_BEFORE] = asyncio.get_running_loop().time() + throttle / 1000
        return answer

    def _answer(self, request: ProduceRequest, results) -> dict[str, Any]:
        offsets: list[dict[str, Any]] = []
        first_error: SluiceError | None = None
        for r in results:
            if r.error is None:
                offsets.append({"partition_id": r.partition, "offset": r.offset})
            else:
                first_error = first_error or r.error
                offsets.append({"partition_id": r.partition, "offset": None, **error_body(r.error)})
        if first_error is None:
            return {"id": request.id, "offsets": offsets}
        answer = error_answer(request.id, first_error)
        if any(o["offset"] is not None for o in offsets):
            answer["offsets"] = offsets  # some partitions appended, some did not
        return answer

    # --- writer ----------------------------------------------------------------------

    async def _write(self) -> None:
        sock = self.sock
        while True:
            item = await self.queue.get()
            if isinstance(item, _End):
                if item.error is not None:
                    await close_after_error(sock, item.error)
                else:
                    await sock.close(item.code or CLOSE_NORMAL)
                return
            if item.task is not None:
                try:
                    answer = await item.task
                except Exception:
                    request_id = uuid.uuid4().hex[:16]
                    logger.exception("ws produce request %s failed", request_id)
                    answer = {
                        "id": item.request_id,
                        "error_code": "UNKNOWN_SERVER_ERROR",
                        "message": "unexpected broker error; quote request id "
                        f"{request_id} when reporting it",
                        "request_id": request_id,
                    }
            else:
                assert item.answer is not None
                answer = item.answer
            not_before = answer.pop(_NOT_BEFORE, None)
            if not_before is not None:
                wait = not_before - asyncio.get_running_loop().time()
                if wait > 0:
                    await asyncio.sleep(wait)
            await sock.send_json(answer)
            self.window.release(item.nbytes)
            if answer.get("error_code") == UnauthenticatedError.error_code:
                # the key is no longer valid (revoked): nothing more will succeed
                code = close_code_for(UnauthenticatedError(""))
                await sock.close(code, reason=UnauthenticatedError.error_code)
                return


_NOT_BEFORE = "_not_before"  # an answer's throttle deadline (loop time), never sent


def entries_bytes(entries) -> int:
    """What a JSON produce request counts against the produce byte rate: keys and values."""
    return sum(len(e.key or b"") + len(e.value or b"") for e in entries)


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config

    async def produce_stream(request: web.Request) -> web.StreamResponse:
        acks = acks_param(request.query)
        if acks == 0:
            raise InvalidRequestError(
                "acks=0 is not offered on the produce stream (its answers are the "
                "acknowledgements); use acks=1 or acks=all"
            )
        sock = StreamSocket(
            broker,
            "produce",
            # a binary frame is its batches (at most max_request_bytes) plus a small header
            max_msg_size=config.max_request_bytes + MAX_BINARY_HEADER_BYTES,
            # per-topic WRITE is checked per request; connecting needs only a valid key
            connect_check=lambda header: broker.authorize(header, "DESCRIBE", "cluster"),
        )
        sock.check_upgrade(request)
        sock.authenticate_header(request)  # 401 before the upgrade when the header is bad
        await sock.accept(request)
        try:
            stream = ProduceStream(broker, sock, acks)
            # a transactional producer's stream: its batches are verified with the coordinator
            stream.transactional_id = request.query.get("transactional_id")
            if forwardable(request):
                stream.upstreams = UpstreamProduce(broker, sock, acks, stream.transactional_id)
            await stream.run()
        except Exception:
            logger.exception("ws produce stream failed")
            await sock.close(CLOSE_INTERNAL_ERROR)
        finally:
            sock.release()
        return sock.ws

    app.router.add_get("/sluice/v1/ws/produce", produce_stream, name="ws_produce")
