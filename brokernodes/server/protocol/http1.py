"""The lean HTTP/1.1 front's protocol core, sans-IO: bytes in, events out, answers to bytes.

Why: the front's parsing, pipelining state and hand-off rules are the part most easily got
wrong, and they can be tested exhaustively (every split of a byte stream, every malformed
head) only where no socket, event loop or timer is involved. ``http.fast`` is the shell
that feeds this parser what the socket reads and writes what the serializer returns.

What ``RequestParser`` takes: plain HTTP/1.1 requests whose method and path the caller's
``route`` function accepts, a ``POST`` with one ``Content-Length`` of at most ``max_body``
bytes or a ``GET`` without a body, with a ``Host`` header and without ``Transfer-Encoding``,
``Expect`` or ``Upgrade``. Anything else, or anything it is unsure of (a NUL or bare CR in
the head, a percent-escape in the path, a head over ``MAX_HEAD`` bytes, bytes that cannot
start a method), yields ``HandOff``: the whole connection, with every byte read so far
(``trailing_data``), goes to a full HTTP server, which answers it properly. ``HandOff.status``
is the status the request warrants if it is malformed (400, 413, 431), 0 if it is only not
a request this core serves.

Events, per request: ``Request`` (the parsed head), ``Data`` (the whole body, only if it is
not empty: the front buffers bodies of at most ``max_body`` bytes), ``EndOfMessage``. The
parser then pauses (``PAUSED``) until the caller calls ``start_next_cycle`` (the shell does
once it has started serving the request; it keeps the answers in order): pipelined requests
wait in the buffer meanwhile. After a request with
``Connection: close`` it stays paused for good (``keep_alive`` is False). ``NEED_DATA`` says
more bytes are needed; ``state`` says whether a head or a body is under way (the shell's
deadlines).

A client resends the same head for every batch to one partition (same path, query and
headers; the body length may differ), so the parser keeps up to ``HEAD_CACHE`` heads it
parsed into requests, keyed by their bytes without the digits of ``Content-Length: ``, and
gives for a repeated head the kept ``Request`` (the same length) or a copy with the new length
(``Request.with_length``) without parsing or routing it again; its query is parsed once
(``Request.query``). Only heads that parsed into a request are kept, a length is only taken
when it is all digits and within ``max_body`` (else the head is parsed afresh, and handed
off as before), and any other byte of difference is a head parsed afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from brokernodes.server.protocol.request import parse_query

MAX_HEAD = 16 * 1024  # a longer request head is handed off (the full server refuses it)
# distinct request heads one parser keeps parsed: a client resends the same head (path,
# query, headers, body length) for each batch to a partition
HEAD_CACHE = 16

# parser states
IDLE = "IDLE"  # between requests, no byte of the next one read
HEAD = "HEAD"  # part of a head read
BODY = "BODY"  # head parsed, part of its body read
DONE = "DONE"  # a request read whole; waiting for start_next_cycle
HANDED_OFF = "HANDED_OFF"  # the connection belongs to the full server now

# headers only the full server handles
_HANDOFF_HEADERS = frozenset({b"transfer-encoding", b"expect", b"upgrade"})


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA = _Sentinel("NEED_DATA")
PAUSED = _Sentinel("PAUSED")


class Request:
    """A request head: ``route`` is what the caller's route function returned for it."""

    __slots__ = (
        "_query",
        "content_length",
        "headers",
        "keep_alive",
        "method",
        "path",
        "query_string",
        "route",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query_string: str,
        headers: CIMultiDictProxy[str],
        content_length: int,
        keep_alive: bool,
        route: Any,
    ) -> None:
        self.method = method
        self.path = path
        self.query_string = query_string
        self.headers = headers
        self.content_length = content_length
        self.keep_alive = keep_alive
        self.route = route
        self._query: MultiDictProxy[str] | None = None

    def with_length(self, length: int) -> Request:
        """This request with another body length (its ``Content-Length`` header too)."""
        headers = CIMultiDict(self.headers)
        headers["Content-Length"] = str(length)
        other = Request(
            self.method,
            self.path,
            self.query_string,
            CIMultiDictProxy(headers),
            length,
            self.keep_alive,
            self.route,
        )
        other._query = self.query  # parsed once, for every length
        return other

    @property
    def query(self) -> MultiDictProxy[str]:
        """The query string parsed (once per head: a repeated head is parsed once)."""
        query = self._query
        if query is None:
            query = self._query = MultiDictProxy(MultiDict(parse_query(self.query_string)))
        return query

    def __repr__(self) -> str:
        return f"Request({self.method} {self.path}?{self.query_string})"


class Data:
    """A request's whole body."""

    __slots__ = ("data",)

    def __init__(self, data: bytearray) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Data({len(self.data)} bytes)"


class EndOfMessage:
    """The request read so far is whole."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EndOfMessage()"


END_OF_MESSAGE = EndOfMessage()


class HandOff:
    """The connection goes to the full HTTP server with ``RequestParser.trailing_data``."""

    __slots__ = ("reason", "status")

    def __init__(self, reason: str, status: int = 0) -> None:
        self.reason = reason
        self.status = status

    def __repr__(self) -> str:
        return f"HandOff({self.reason!r}, {self.status})"


Event = Request | Data | EndOfMessage | HandOff | _Sentinel
RouteFn = Callable[[str, str], Any]  # (method, path) -> route, or None: not served here


class RequestParser:
    """Server-side HTTP/1.1 parser for the lean front (module docstring)."""

    __slots__ = ("_body_end", "_heads", "_route", "buf", "keep_alive", "max_body", "state")

    def __init__(self, route: RouteFn, max_body: int) -> None:
        self._route = route
        # a head's bytes without its Content-Length digits -> (those digits, its request)
        self._heads: dict[bytes, tuple[bytes, Request]] = {}
        self.max_body = max_body
        self.buf = bytearray()
        self.state = IDLE
        self.keep_alive = True
        self._body_end = 0

    def receive_data(self, data: bytes) -> None:
        self.buf += data
        if self.state is IDLE and data:
            self.state = HEAD

    @property
    def trailing_data(self) -> bytes:
        """Every byte read and not yet consumed (what a hand-off passes on)."""
        return bytes(self.buf)

    def discard(self) -> None:
        """Drop every byte read and not yet consumed (the connection is closing, or its
        bytes were passed on with a hand-off)."""
        self.buf.clear()
        if self.state is HEAD:
            self.state = IDLE

    def start_next_cycle(self) -> None:
        """The last request is being served: parse the next one."""
        if self.state is not DONE or not self.keep_alive:
            raise RuntimeError(f"start_next_cycle in state {self.state}")
        self.state = HEAD if self.buf else IDLE

    def next_event(self) -> Event:
        """The next event from the bytes received so far (module docstring)."""
        state = self.state
        if state is BODY:  # inline: two of a request's three events come from here
            length = self._body_end
            if length < 0:  # no (more) body to give out: the message ends
                self.state = DONE
                return END_OF_MESSAGE
            buf = self.buf
            if len(buf) < length:
                return NEED_DATA
            self._body_end = -1
            body = buf[:length]
            del buf[:length]
            return Data(body)
        if state is HEAD:  # inline too: one call per event
            buf = self.buf
            if not 65 <= buf[0] <= 90:  # no method: TLS, garbage
                return self._hand_off("not an HTTP/1.1 request line", 400)
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    return self._hand_off("request head too large", 431)
                return NEED_DATA
            if end > MAX_HEAD:
                return self._hand_off("request head too large", 431)
            parsed = self._cached_head(bytes(buf[:end]))
            if parsed.__class__ is HandOff:
                self.state = HANDED_OFF
                return parsed
            del buf[: end + 4]
            self.keep_alive = parsed.keep_alive  # type: ignore[union-attr]
            self._body_end = parsed.content_length or -1  # type: ignore[union-attr]
            self.state = BODY
            return parsed
        if state is IDLE:
            return NEED_DATA
        if state is DONE:
            return PAUSED
        return HandOff("handed off already")

    def _cached_head(self, raw: bytes) -> Request | HandOff:
        """The head parsed, from ``_heads`` when a head like it was parsed before: the same
        bytes, or the same but for the digits of its ``Content-Length`` (a producer's
        batches differ in size), whose request is the kept one with that length."""
        cut = raw.find(b"\r\nContent-Length: ")
        if cut < 0:
            key, value = raw, b""
        else:
            start = cut + 18
            stop = raw.find(b"\r\n", start)
            if stop < 0:
                stop = len(raw)
            key, value = raw[:start] + raw[stop:], raw[start:stop]
        kept = self._heads.get(key)
        if kept is not None:
            if value == kept[0]:
                return kept[1]
            if value.isdigit() and int(value) <= self.max_body:
                return kept[1].with_length(int(value))
        parsed = self._parse_head(raw)
        if (
            kept is None
            and parsed.__class__ is Request
            and len(self._heads) < HEAD_CACHE
            and (not value or parsed.method == "POST")  # a GET's length is its own rule
        ):
            self._heads[key] = (value, parsed)  # type: ignore[assignment]
        return parsed

    def _hand_off(self, reason: str, status: int = 0) -> HandOff:
        self.state = HANDED_OFF
        return HandOff(reason, status)

    def _parse_head(self, head: bytes) -> Request | HandOff:
        lines = head.split(b"\r\n")
        if b"\0" in head or head.count(b"\r") != len(lines) - 1:
            return HandOff("a NUL or a bare CR in the head", 400)
        request_line = lines[0].split(b" ")
        if len(request_line) != 3 or request_line[2] != b"HTTP/1.1":
            return HandOff("not an HTTP/1.1 request line")
        method = request_line[0]
        if method != b"POST" and method != b"GET":
            return HandOff("a method this front does not serve")
        target = request_line[1]
        if not target.startswith(b"/"):
            return HandOff("not an origin-form target")
        raw_path, _, query = target.partition(b"?")
        if b"%" in raw_path or b"#" in target:
            return HandOff("percent-escapes or a fragment in the target")
        try:
            path = raw_path.decode("ascii")
            query_string = query.decode("ascii")
        except UnicodeError:
            return HandOff("a target that is not ASCII", 400)
        method_s = method.decode("ascii")
        route = self._route(method_s, path)
        if route is None:
            return HandOff("a route this front does not serve")
        headers: CIMultiDict[str] = CIMultiDict()
        length = None
        keep_alive = True
        host = False
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip() or b" " in name or b"\t" in name:
                return HandOff("a malformed header line", 400)
            lname = name.lower()
            value = value.strip()
            if lname in _HANDOFF_HEADERS:
                return HandOff(f"a {lname.decode()} header")
            if lname == b"content-length":
                if length is not None or not value.isdigit():
                    return HandOff("a Content-Length repeated or not a number", 400)
                length = int(value)
            elif lname == b"host":
                host = True
            elif lname == b"connection":
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    keep_alive = False
                if b"upgrade" in tokens:
                    return HandOff("Connection: upgrade")
            try:
                headers.add(name.decode("ascii"), value.decode("latin-1"))
            except UnicodeError:
                return HandOff("a header name that is not ASCII", 400)
        if not host:
            return HandOff("no Host header (HTTP/1.1 requires it)", 400)
        if method == b"GET":
            if length:
                return HandOff("a GET with a body")
            length = 0
        elif length is None:
            return HandOff("a POST without Content-Length")
        elif length > self.max_body:
            return HandOff("a body over this front's limit", 413)
        return Request(
            method_s,
            path,
            query_string,
            CIMultiDictProxy(headers),
            length,
            keep_alive,
            route,
        )


# --- answers --------------------------------------------------------------------------


class _Date:
    """The ``Date`` header value, formatted once a second."""

    second = -1
    value = b""

    @classmethod
    def now(cls) -> bytes:
        t = int(time.time())
        if t != cls.second:
            cls.second, cls.value = t, formatdate(t, usegmt=True).encode()
        return cls.value


_FRAMING = frozenset({"content-length", "connection", "date", "transfer-encoding"})


def _status_and_headers(status: int, reason: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """The status line and the caller's header lines (framing headers dropped)."""
    parts = [f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1")]
    for name, value in headers:
        if name.lower() not in _FRAMING:
            parts.append(f"{name}: {value}\r\n".encode("latin-1"))
    return b"".join(parts)


def response(
    status: int,
    reason: str,
    headers: Iterable[tuple[str, str]],
    body: bytes | bytearray,
    keep_alive: bool,
    length: int = -1,
) -> bytes:
    """An answer: status line, the caller's headers, then the framing headers this
    serializer owns (``Content-Length``, ``Date``, ``Connection: close`` when the connection
    ends; the caller's own are dropped), then ``body``. ``length`` (with an empty ``body``)
    announces a body the caller sends apart, such as file slices."""
    parts = [_status_and_headers(status, reason, headers)]
    if length < 0:
        length = len(body)
    parts.append(b"Content-Length: %d\r\nDate: %s\r\n" % (length, _Date.now()))
    parts.append(b"\r\n" if keep_alive else b"Connection: close\r\n\r\n")
    parts.append(body)
    return b"".join(parts)


def response_head(
    status: int, reason: str, headers: Iterable[tuple[str, str]], length: int, keep_alive: bool
) -> bytes:
    """The status line and headers of an answer whose ``length``-byte body is sent apart."""
    return response(status, reason, headers, b"", keep_alive, length)


class Answer:
    """A whole answer as the lean front writes it, for the routes answered most often (a
    binary produce): ``status``, ``headers`` (besides the framing ones, which are the
    serializer's) and ``body``. Its status line and header lines are encoded once for each
    distinct (status, headers) and kept (``answer``); the full server is handed it as its own
    response type (``http.util.web_response``)."""

    __slots__ = ("body", "headers", "status")

    keep_alive = None  # the connection stays open unless the request or the front ends it

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def reason(self) -> str:
        return _reason(self.status)

    def __repr__(self) -> str:
        return f"Answer({self.status}, {len(self.body)} bytes)"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


_ANSWER_HEADS: dict[tuple[int, tuple[tuple[str, str], ...]], bytes] = {}
ANSWER_HEADS = 256  # distinct (status, headers) kept encoded; a throttle time is one header


def answer(a: Answer, keep_alive: bool) -> bytes:
    """``response`` for an ``Answer``, its status line and headers encoded once."""
    key = (a.status, a.headers)
    head = _ANSWER_HEADS.get(key)
    if head is None:
        head = _status_and_headers(a.status, _reason(a.status), a.headers)
        if len(_ANSWER_HEADS) >= ANSWER_HEADS:
            _ANSWER_HEADS.clear()
        _ANSWER_HEADS[key] = head
    body = a.body
    return b"%sContent-Length: %d\r\nDate: %s\r\n%s%s" % (
        head,
        len(body),
        _Date.now(),
        b"\r\n" if keep_alive else b"Connection: close\r\n\r\n",
        body,
    )
