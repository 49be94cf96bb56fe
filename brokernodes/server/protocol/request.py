"""``SluiceRequest``: the one request type the broker's HTTP handlers and middleware see,
whichever front read the request.

Why: the lean front (``http.fast``) parses requests itself, aiohttp parses the rest. Handlers
written against aiohttp's ``web.Request`` would bind the lean front to imitating it, an
imitation nothing checks. Instead both fronts build this small class: the lean front from
its parser's events (a ``BufferedBody`` for the whole body), aiohttp's front from a
``web.Request`` in the middleware (``from_web``). It holds what handlers use: ``method``,
``path``, ``query``, ``match_info`` (the path's variables, ``.route.name``), ``headers``, the body
(``content_length`` and ``content``, read with ``http.body.read_body``), ``remote``,
``transport`` (for connection quotas) and ``version``.

No I/O here: ``content`` is whatever stream the front gives (``BufferedBody`` for a body
that is already whole), and ``transport`` is passed through, never used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from multidict import CIMultiDictProxy, MultiDict, MultiDictProxy

HTTP_11 = (1, 1)
_EMPTY_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())


def parse_query(qs: str) -> list[tuple[str, str]]:
    """``parse_qsl(qs, keep_blank_values=True)``, without its per-field unquoting when
    there is nothing to unquote (no ``%`` or ``+``): the common case, and a fetch's query
    is parsed on every request."""
    if "%" in qs or "+" in qs:
        return parse_qsl(qs, keep_blank_values=True)
    pairs = []
    for field in qs.split("&"):
        if field:
            name, _, value = field.partition("=")
            pairs.append((name, value))
    return pairs


class MatchInfo(dict):
    """The path's variables, and ``.route`` (whose ``.name`` is the route's name)."""

    __slots__ = ("route",)

    route: Any  # set by whoever matched the path (a dict subclass's __init__ costs a call)


class BufferedBody:
    """A body that is already whole, read as a stream (``is_eof``, ``readany``)."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes | bytearray) -> None:
        self._data = data

    def is_eof(self) -> bool:
        return True

    async def readany(self) -> bytes | bytearray:
        data, self._data = self._data, b""
        return data

    def take(self) -> bytes | bytearray:
        """The whole body, without a copy (``readany`` without the await); read once."""
        data, self._data = self._data, b""
        return data


class SluiceRequest:
    """One HTTP request as the handlers see it (module docstring)."""

    __slots__ = (
        "_query",
        "_query_source",
        "content",
        "content_length",
        "headers",
        "match_info",
        "method",
        "path",
        "remote",
        "transport",
        "version",
    )

    def __init__(
        self,
        method: str,
        path: str,
        query: str | Any,
        match_info: Mapping[str, str],
        headers: CIMultiDictProxy[str],
        content: Any,
        content_length: int | None,
        remote: str | None,
        transport: Any = None,
        version: tuple[int, int] = HTTP_11,
    ) -> None:
        self.method = method
        self.path = path
        # a query string, or an object whose ``.query`` is the parsed query (parsed lazily:
        # most produce requests never look at it)
        self._query_source = query
        self._query: MultiDictProxy[str] | None = None
        self.match_info = match_info
        self.headers = headers
        self.content = content
        self.content_length = content_length
        self.remote = remote
        self.transport = transport
        self.version = version

    @classmethod
    def from_web(cls, request: Any) -> SluiceRequest:
        """aiohttp's ``web.Request`` as a ``SluiceRequest``: its body stream, its parsed
        query and its match info as they are (so both fronts parse alike what each parses)."""
        return cls(
            request.method,
            request.path,
            request,
            request.match_info,
            request.headers,
            request.content,
            request.content_length,
            request.remote,
            request.transport,
            request.version,
        )

    @property
    def query(self) -> MultiDictProxy[str]:
        query = self._query
        if query is None:
            source = self._query_source
            if source.__class__ is not str:
                query = source.query
            elif source:
                query = MultiDictProxy(MultiDict(parse_query(source)))
            else:
                query = _EMPTY_QUERY
            self._query = query
        return query

    @property
    def route_name(self) -> str | None:
        """The matched route's name (None: no route matched)."""
        route = getattr(self.match_info, "route", None)
        return getattr(route, "name", None)

    def __repr__(self) -> str:
        return f"<SluiceRequest {self.method} {self.path}>"
