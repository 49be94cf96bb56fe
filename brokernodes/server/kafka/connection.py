"""One Kafka client connection: read size-prefixed requests, answer them in order.

The bytes come from a :class:`~.framing.FrameReader` (the connection's asyncio protocol), so
a request already whole in the receive buffer is taken without waiting on the event loop.

Like Kafka's own socket server, a connection handles one request at a time and reads the
next only once the answer is written, so answers are always in request order, with one
exception. A client pipelining Produce requests (librdkafka keeps up to ``max.in.flight`` on
a connection) gets them run concurrently when the next one has begun to arrive (bytes of it
are in the receive buffer): a one-partition Produce with acks 1 or all starts as soon as the
one before has appended (``append_order``: the partition signals when its append lock is
released) or has been answered, so appends keep the order sent while the waits after them (a
group commit's fsync, an acks=all wait) overlap and one fsync covers several requests.
Answers are still written strictly in request order, and a pipelined answer is held back
while more requests are coming (a pipelined one behind it, or a whole request buffered) to
leave with theirs in one write: one TCP push and one wake-up of the client for the lot, as the
HTTP front answers a pipeline. It is never held behind a request that waits (it goes out once
the requests after it have run as far as they can at once) and goes out before any other
write or a close. At most ``MAX_PIPELINED`` run at once;
any other request waits until every one before it is answered. A pipelined request that
fails closes the connection after the answers before it (the ones after it are not written,
though they may have appended, as a client cut off mid-pipeline may find). A
one-request-at-a-time client never pays for this: with nothing buffered behind it a request
runs in the connection's own task. A throttled pipelined answer mutes the connection from
when it is written. Before SASL succeeds only ApiVersions, SaslHandshake and
SaslAuthenticate are accepted (anything else closes the connection, as Kafka does), and the
exchange must finish within the request-head timeout. A handler's ``throttle_time_ms`` mutes
the connection for that long after the answer is sent (KIP-219). An API or version Sluice
does not speak: ApiVersions gets its v0 answer with UNSUPPORTED_VERSION and the supported
ranges (so the client can retry), anything else closes the connection, as Kafka does, since
there is no schema to answer it in.

Deadlines: SASL must finish within the request-head timeout from accept; a connection that
sends nothing for ``connections_max_idle_s`` is closed (one timer per connection, re-armed
only when it fires, as Kafka's idle reaper checks connections rather than each read); a
request body not already buffered must arrive within the body timeout; a size prefix over
``max_request_bytes`` (before SASL: 512 KiB, as Kafka's ``sasl.server.max.receive.size``)
closes the connection before any of the body is read; an answer the client does not read
for ``SEND_STALL_TIMEOUT_S`` (no progress) closes it, so a client that never reads cannot
hold a handler or open files. Until SASL succeeds the connection counts among the
unauthenticated ones (the same pool as the HTTP fronts', ``http.connection_limits``),
which may evict it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError, UnauthenticatedError
from brokernodes.server.http.sendfile import (
    SEND_STALL_TIMEOUT_S,
    close_slices,
    send_copy,
    send_zero_copy,
)
from brokernodes.server.kafka.context import EncodedAnswer, FileRecords, KafkaContext
from brokernodes.server.kafka.framing import FrameReader
from brokernodes.server.kafka.handlers import HANDLERS
from brokernodes.server.kafka.handlers.core import (
    PRE_AUTH,
    AuthenticationFailed,
    api_versions_body,
    authenticate,
)
from brokernodes.server.kafka.log_limit import PeerLogLimit
from brokernodes.server.protocol.append_order import on_appended
from brokernodes.server.protocol.kafka import apis, fetch_request, produce_request
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.codec import ProtocolError
from brokernodes.server.protocol.kafka.frames import (
    RequestHeader,
    decode_request,
    encode_response,
    encoded_frame,
    parse_request_header,
    response_frame,
)
from brokernodes.server.protocol.kafka.schema import snake

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.kafka.listener import KafkaListener

logger = logging.getLogger("sluice.kafka")
CLOSE_LOG_LIMIT = PeerLogLimit()
_SIZE = struct.Struct(">i")


# Before SASL succeeds a request may be at most this big (Kafka's
# sasl.server.max.receive.size), so unauthenticated connections stay within the memory
# budget ``http.connection_limits`` gives each of them.
MAX_UNAUTHENTICATED_REQUEST_BYTES = 512 * 1024
# Produce requests of one connection running at once (module docstring)
MAX_PIPELINED = 16
# How long a connection whose SASL exchange failed stays open after the answer (Kafka's
# connection.failed.authentication.delay.ms default)
FAILED_AUTHENTICATION_CLOSE_DELAY_S = 0.1


class CloseConnection(Exception):
    """End this connection (after logging ``reason``)."""


_ENDPOINTS: dict[int, str] = {}


def endpoint(api_key: int) -> str:
    """The ``sluice_request_seconds`` endpoint label of a Kafka API (``kafka_fetch``)."""
    name = _ENDPOINTS.get(api_key)
    if name is None:
        api = apis.apis().get(api_key)
        name = _ENDPOINTS[api_key] = f"kafka_{snake(api.name) if api else 'unknown'}"
    return name


class KafkaConnection:
    # a send that makes no progress for this long closes the connection (tests shorten it)
    send_stall_timeout_s = SEND_STALL_TIMEOUT_S

    def __init__(
        self,
        listener: KafkaListener,
        broker: Broker,
        reader: FrameReader,
    ) -> None:
        self.listener = listener
        self.broker = broker
        self.reader = reader
        transport = self.transport = reader.transport
        assert transport is not None
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else None
        self.ctx = KafkaContext(
            broker,
            self.peer,
            transport,
            tls=transport.get_extra_info("sslcontext") is not None,
        )
        self._raw_sasl = False  # SaslHandshake v0: the next frame is a bare PLAIN token
        self._handling = False  # between reading a request and writing its answer
        # pipelined Produce requests not yet answered, oldest first: (task, answered); the
        # future is True once its answer is written, False if it failed (nothing after it
        # may be written)
        self._pipeline: list[tuple[asyncio.Task, asyncio.Future]] = []
        self._failed = False  # a pipelined request failed: the connection is closing
        self._unstarted = 0  # pipelined tasks created that have not run yet
        # pipelined answers held back to go out with the ones after them (one write)
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._mute_until = 0.0  # loop time until which a throttled pipelined answer mutes
        self.task: asyncio.Task | None = None  # the task running ``run`` (the listener's)
        self._loop = asyncio.get_running_loop()
        # since when the connection has been waiting for a request (None: handling one)
        self._waiting_since: float | None = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """Whether a request is being handled or an answer is owed (stopping waits)."""
        return self._handling or bool(self._pipeline)

    @property
    def key_id(self) -> str | None:
        p = self.ctx.principal
        return p.key_id if p is not None else None

    def close(self) -> None:
        self.transport.abort()

    def evict(self) -> None:
        """Over the unauthenticated-connection caps: Kafka has no answer for that, so the
        connection just closes (clients reconnect)."""
        logger.debug("closing Kafka connection from %s: too many unauthenticated", self.peer)
        self.close()

    async def run(self) -> None:
        config = self.broker.config
        self._arm_idle(self._loop.time() + config.connections_max_idle_s)
        try:
            async with asyncio.timeout(config.request_head_timeout_s) as deadline:
                while not self.ctx.authenticated:
                    await self._one_request()
                deadline.reschedule(None)
            # no longer among the unauthenticated (``authorize`` reports it too, when the
            # broker's connection quotas are wired to the pool)
            self.listener.pool.authenticated(self.transport)
            while not self.broker.stopping:
                await self._one_request()
        except Exception as e:
            self._log_end(e)
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            if self._pipeline:  # requests started finish (their appends are made)
                await asyncio.gather(*(t for t, _ in self._pipeline), return_exceptions=True)
            self._flush_out()
            self.transport.abort() if self.broker.stopping else self.transport.close()

    def _log_end(self, e: Exception) -> None:
        """Why the connection ends, logged as its kind deserves."""
        if isinstance(e, TimeoutError | asyncio.IncompleteReadError | ConnectionError):
            return  # the client left, went silent, or a failure was logged already
        if isinstance(e, CloseConnection):
            self._log_close(str(e))
        elif isinstance(e, ProtocolError):
            self._log_close(f"malformed request: {e}")
        else:
            logger.error("Kafka connection from %s failed; closing it", self.peer, exc_info=e)

    def _arm_idle(self, when: float) -> None:
        self._idle_timer = self._loop.call_at(when, self._check_idle)

    def _check_idle(self) -> None:
        """The idle timer fired: close if no request came for ``connections_max_idle_s``
        (the pending read then ends), else re-arm for when that would be."""
        idle = self.broker.config.connections_max_idle_s
        since = self._waiting_since
        now = self._loop.time()
        if since is not None and now >= since + idle:
            self._idle_timer = None
            self.transport.close()
            return
        self._arm_idle((since if since is not None else now) + idle)

    def _log_close(self, reason: str) -> None:
        """One INFO line per peer per interval (``log_limit``): a reconnecting client with a
        wrong secret must not flood the log."""
        held = CLOSE_LOG_LIMIT.allow(self.peer, time.monotonic())
        if held is not None:
            more = f" ({held} more from this address since its last line)" if held else ""
            logger.info("closing Kafka connection from %s: %s%s", self.peer, reason, more)

    async def _read_frame(self) -> bytes:
        config = self.broker.config
        reader = self.reader
        size = reader.next_size()
        if size is None:
            self._waiting_since = self._loop.time()  # the idle timer closes a silent one
            await reader.wait_for(4)
            self._waiting_since = None
            size = reader.next_size()
            assert size is not None
        limit = config.max_request_bytes
        if not self.ctx.authenticated:
            limit = min(limit, MAX_UNAUTHENTICATED_REQUEST_BYTES)
        if size < 0 or size > limit:
            raise CloseConnection(
                f"a request of {size} bytes is over this broker's limit of {limit} bytes"
                + ("" if self.ctx.authenticated else " before SASL authentication")
            )
        # the usual small request arrived whole with its prefix: no wait, no deadline
        if reader.buffered() < 4 + size:
            async with asyncio.timeout(config.body_timeout_s):
                await reader.wait_for(4 + size)
        return reader.take_frame(size)

    async def _one_request(self) -> None:
        if self._mute_until:  # KIP-219 for a throttled pipelined answer
            delay, self._mute_until = self._mute_until - self._loop.time(), 0.0
            if delay > 0:
                await asyncio.sleep(min(delay, self.broker.config.connections_max_idle_s))
        frame = await self._read_frame()
        self._handling = True
        try:
            header = request = None
            if not self._raw_sasl and (self._pipeline or self.reader.buffered()):
                header = parse_request_header(frame)
                if header.supported and header.api_key == apis.PRODUCE:
                    request = _decode(header, frame)
                    if _pipelinable(request):
                        await self._start_pipelined(header, request)
                        return
            if self._pipeline or self._failed:
                await self._settle()
            throttle_ms = await self._answer(frame, header, request)
        finally:
            self._handling = False
        if throttle_ms > 0:
            # KIP-219: the client has been told; read nothing more for that long (bounded)
            await asyncio.sleep(min(throttle_ms / 1000, self.broker.config.connections_max_idle_s))

    async def _start_pipelined(self, header: RequestHeader, request: dict) -> None:
        """Start a Produce behind those in flight; return once it has appended or been
        answered (the next request may then start) or, at the bound, once the oldest is
        answered."""
        pipeline = self._pipeline
        while len(pipeline) >= MAX_PIPELINED:
            await asyncio.shield(pipeline[0][1])
        if self._failed:
            raise ConnectionResetError("a pipelined request failed")
        loop = self._loop
        gate = loop.create_future()

        def go(*_: object) -> None:
            if not gate.done():
                gate.set_result(None)

        turn = pipeline[-1][1] if pipeline else None
        answered = loop.create_future()
        token = on_appended.set(go)  # the task's context copy carries it to the partition
        try:
            task = loop.create_task(self._pipelined(header, request, turn, answered))
        finally:
            on_appended.reset(token)
        self._unstarted += 1
        pipeline.append((task, answered))
        task.add_done_callback(go)
        await gate

    async def _pipelined(
        self,
        header: RequestHeader,
        request: dict,
        turn: asyncio.Future | None,
        answered: asyncio.Future,
    ) -> None:
        """One pipelined Produce: handled now, answered after the one before it."""
        self._unstarted -= 1
        ok = False
        try:
            started = time.perf_counter()
            body = None
            try:
                body = await HANDLERS[apis.PRODUCE](self.ctx, header, request)
                ok = True
            except UnauthenticatedError as e:
                self._log_end(CloseConnection(f"key no longer valid: {e.message}"))
            except Exception as e:
                self._log_end(e)
            if turn is not None and not await turn:
                ok = False  # an earlier request failed: the connection is closing
            if ok:
                if not self._hold(header, body, answered):
                    await self._write_answer(header, body)
                elif self.transport.get_write_buffer_size():
                    await self._drain()  # a client not reading is still cut off
                self.listener.observe(header.api_key, time.perf_counter() - started)
                self._mute_for(body)
        except Exception as e:
            ok = False
            self._log_end(e)
        finally:
            answered.set_result(ok)
            # its entry, found by its future (usually the first): asyncio.current_task
            # would cost a getpid() system call per request on 3.11
            pipeline = self._pipeline
            for i, entry in enumerate(pipeline):
                if entry[1] is answered:
                    del pipeline[i]
                    break
            if not ok and not self._failed:
                self._failed = True
                self._flush_out()  # the answers before it
                self.transport.close()

    def _hold(self, header: RequestHeader, body, answered: asyncio.Future) -> bool:
        """Hold a pipelined answer back when more requests are coming (a pipelined one after
        it, or a whole request buffered), to go out with their answers in one write: one TCP
        push and one wake-up of the client for the lot. Held answers go out once the
        requests after them have run as far as they can at once (``_flush_soon``), never
        behind one that waits, and before any other write or a close."""
        if (
            type(body) is not EncodedAnswer
            or len(body.chunks) != 1
            or body.throttle_time_ms  # a throttled answer mutes from when it is written
            or self._mute_until
            or (self._pipeline[-1][1] is answered and not self.reader.frame_ready())
        ):
            return False
        self._out.append(encoded_frame(header, body.chunks, body.size)[0])
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_soon, 0)
        return True

    def _flush_soon(self, rounds: int) -> None:
        """Write the held answers once the pipelined requests started have run and no whole
        request waits to be started (at most ``MAX_PIPELINED`` loop turns: the connection
        may be blocked, e.g. behind an append lock)."""
        if (
            rounds < MAX_PIPELINED
            and not self._mute_until
            and (self._unstarted or self.reader.frame_ready())
        ):
            self._loop.call_soon(self._flush_soon, rounds + 1)
            return
        self._flush_scheduled = False
        self._flush_out()

    def _flush_out(self) -> None:
        """The held answers, in one write (nothing once the connection is closing)."""
        out = self._out
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            if not self.transport.is_closing():
                self.transport.write(data)

    def _mute_for(self, body) -> None:
        """A throttled pipelined answer mutes the connection from now (KIP-219)."""
        if type(body) is EncodedAnswer:
            ms = body.throttle_time_ms
        else:
            ms = body.get("throttle_time_ms", 0) if body else 0
        if ms > 0:
            self._mute_until = max(self._mute_until, self._loop.time() + ms / 1000)

    async def _settle(self) -> None:
        """Until every pipelined request is answered (a failed one ends the connection)."""
        while self._pipeline:
            await asyncio.shield(self._pipeline[-1][1])
        if self._failed:
            raise ConnectionResetError("a pipelined request failed")

    async def _write_answer(self, header: RequestHeader, body) -> None:
        if self._out:  # held pipelined answers go first
            self._flush_out()
        if type(body) is EncodedAnswer:
            chunks = encoded_frame(header, body.chunks, body.size)
            if len(chunks) == 1:  # the usual answer: one write, the kernel takes all of it
                transport = self.transport
                if transport.is_closing():
                    return  # the client went while its request ran: no one to answer
                transport.write(chunks[0])
                if transport.get_write_buffer_size():
                    await self._drain()
                return
            await self._send(chunks)
        elif body is not None:
            await self._send(encode_response(header, body))

    async def _answer(
        self, frame: bytes, header: RequestHeader | None = None, request: dict | None = None
    ) -> int:
        """Answer one request (its header and body when already parsed); the throttle time
        the answer reported (ms)."""
        if self._raw_sasl:  # SaslHandshake v0's bare token, answered with a bare frame
            self._raw_sasl = False
            try:
                authenticate(self.ctx, frame)
            except (SluiceError, ValueError) as e:
                raise CloseConnection(f"SASL authentication failed: {e}") from None
            await self._send([_SIZE.pack(0)])
            return 0
        if header is None:
            header = parse_request_header(frame)
        if not header.supported:
            await self._unsupported(header)
            return 0
        if not self.ctx.authenticated and header.api_key not in PRE_AUTH:
            raise CloseConnection(
                f"API key {header.api_key} before SASL authentication; configure "
                "security.protocol=SASL_PLAINTEXT (or SASL_SSL) and sasl.mechanism=PLAIN"
            )
        self.ctx.client_id = header.client_id
        if request is None:
            request = _decode(header, frame)
        handler = HANDLERS[header.api_key]
        started = time.perf_counter()
        try:
            body = await handler(self.ctx, header, request)
        except AuthenticationFailed as e:
            await self._send(encode_response(header, e.body))
            # Kafka's connection.failed.authentication.delay.ms: the close waits, so the
            # answer is read before the end of the stream (a client that reads both in one
            # wake-up may drop the answer and see only a disconnect), and a client with a
            # wrong secret reconnects no faster than this
            await asyncio.sleep(FAILED_AUTHENTICATION_CLOSE_DELAY_S)
            # the one log line of a failed SASL exchange (the connection closes after it)
            raise CloseConnection(
                f"SASL authentication failed: {e.body.get('error_message')}"
            ) from None
        except UnauthenticatedError as e:
            raise CloseConnection(f"key no longer valid: {e.message}") from None
        finally:
            files = self.ctx.open_files
            if files:
                self.ctx.open_files = []
        try:
            await self._write_answer(header, body)
        finally:
            for f in files:
                close_slices([s.fd for s in f.slices])
        self.listener.observe(header.api_key, time.perf_counter() - started)
        if type(body) is EncodedAnswer:
            return body.throttle_time_ms
        if header.api_key == apis.SASL_HANDSHAKE and header.api_version == 0:
            self._raw_sasl = body is not None and body.get("error_code") == kerr.NONE
        mute_ms, self.ctx.mute_ms = self.ctx.mute_ms, 0
        return body.get("throttle_time_ms", 0) if body else mute_ms

    async def _unsupported(self, header: RequestHeader) -> None:
        if header.api_key == apis.API_VERSIONS:
            codec = apis.response_codec(apis.API_VERSIONS, 0)
            body = codec.encode_new(api_versions_body(kerr.UNSUPPORTED_VERSION))
            v0 = RequestHeader(header.api_key, 0, header.correlation_id, None, False, True, 0)
            await self._send(response_frame(v0, body))
            return
        raise CloseConnection(
            f"API key {header.api_key} version {header.api_version} is not supported "
            "(ApiVersions lists what is)"
        )

    async def _drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark; a client that
        takes nothing for ``send_stall_timeout_s`` is cut off."""
        try:
            async with asyncio.timeout(self.send_stall_timeout_s):
                await self.reader.drain()
        except TimeoutError:
            raise CloseConnection(
                f"the client read nothing of its answer for {self.send_stall_timeout_s:g} s"
            ) from None

    async def _send(self, chunks: list) -> None:
        if self._out:  # held pipelined answers go first
            self._flush_out()
        transport = self.transport
        if transport.is_closing():
            # the client went while its request ran (uvloop raises on a closed transport
            # where asyncio's drops the bytes): no one to answer
            return
        for chunk in chunks:
            if isinstance(chunk, FileRecords):
                if not chunk.length:
                    continue
                await self._drain()
                if self.ctx.tls or self.broker.config.fetch_path != "sendfile":

                    async def write(data: bytes) -> None:
                        transport.write(data)
                        await self._drain()

                    await send_copy(write, chunk.slices)
                else:  # stall-bounded by sendfile.SEND_STALL_TIMEOUT_S
                    await send_zero_copy(transport, chunk.slices)
            else:
                transport.write(chunk)
        if transport.get_write_buffer_size():  # else all of it is with the kernel
            await self._drain()


def _pipelinable(request: dict) -> bool:
    """A Produce that may start before the one before it is answered: one partition (its
    append is the one ``append_order`` signals), an answer to order (acks 1 or all), no
    transaction (its verification would run before the append)."""
    topics = request["topic_data"]
    return (
        (request["acks"] == 1 or request["acks"] == -1)
        and request.get("transactional_id") is None
        and len(topics) == 1
        and len(topics[0]["partition_data"]) == 1
    )


def _decode(header: RequestHeader, frame: bytes) -> dict:
    """A request's body: the usual Produce and Fetch decoded directly, anything else
    generated."""
    key = header.api_key
    if key == apis.PRODUCE or key == apis.FETCH:
        direct = produce_request if key == apis.PRODUCE else fetch_request
        request = direct.decode_single(frame, header.body_offset, header.api_version)
        if request is not None:
            return request
    return decode_request(header, frame)
