"""The SDK's HTTP transport: one aiohttp session per client, bearer auth on every request.

Turns every failure into one of three errors a person (and the retry logic) can act on:

- ``BrokerError``: the broker answered 4xx/5xx; carries its ``error_code`` and message.
- ``BrokerConnectionError``: nothing answered, or the connection broke (retriable); the
  message names the URL and what to check.
- ``ClientTimeoutError``: no answer within the request timeout (retriable).

Requests run at most ``max_connections_per_host`` at once per broker (the producer's
``max_in_flight``, the consumer's 64), so that many pooled connections serve them. Slots are
handed out first come, first served (``slots.FairSlots``): a consumer's partitions beyond the
limit each get their turn as long polls end, rather than losing every race to the partition
that re-sends at once. WebSocket streams are not counted: each holds its connection for as
long as it is open (a consumer's stream per partition), and would keep requests out for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, NamedTuple

import aiohttp
import orjson

from brokernodes.client.slots import FairSlots
from brokernodes.errors import BrokerConnectionError, BrokerError, ClientTimeoutError

__all__ = ["BATCH_CONTENT_TYPE", "HttpResponse", "HttpTransport", "normalize_url"]

BATCH_CONTENT_TYPE = "application/vnd.kafka.recordbatch.v2"
USER_AGENT = "sluice-python/0.1"


class HttpResponse(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else {}


def normalize_url(url: str) -> str:
    """``host:port`` or ``http://host:port/`` -> ``http://host:port`` (no trailing slash)."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


class HttpTransport:
    """Async HTTP client bound to one event loop; create it (or call ``start``) on that loop."""

    def __init__(
        self,
        api_key: str | None,
        *,
        max_connections_per_host: int = 5,
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        share: HttpTransport | None = None,
    ) -> None:
        # ``share``: use that transport's session (its pool of keep-alive connections, which
        # it closes) with slots of this one's own, so that requests of another kind never
        # queue behind its requests but reuse its idle connections (the group consumer's
        # coordinator requests beside its fetches)
        self._share = share
        self._api_key = api_key
        self._limit = max(1, max_connections_per_host)
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._slots: dict[str, FairSlots] = {}  # per broker origin
        headers = {"User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._batch_headers = {"Content-Type": BATCH_CONTENT_TYPE}

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._share is not None:
            return self._share._ensure_session()
        session = self._session
        if session is None or session.closed:
            # no limit here: ``request`` takes a slot first, and streams take none
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=0, ttl_dns_cache=300, enable_cleanup_closed=False
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
                timeout=aiohttp.ClientTimeout(total=None, connect=self.connect_timeout_s),
            )
        return session

    async def close(self) -> None:
        if self._share is not None:
            return  # the session is the sharing transport's to close
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        json: Any = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
    ) -> HttpResponse:
        """One request; returns a 2xx answer or raises one of the errors above. The timeout
        starts once the request has its slot: the wait for one is bounded by the requests
        ahead (each by its own timeout), and a timeout there would send it to the back."""
        headers = None
        if json is not None:
            body = orjson.dumps(json)
            content_type = "application/json"
        if content_type == BATCH_CONTENT_TYPE:
            headers = self._batch_headers
        elif content_type is not None:
            headers = {"Content-Type": content_type}
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        origin = _origin(url)
        slots = self._slots.get(origin)
        if slots is None:
            slots = self._slots[origin] = FairSlots(self._limit)
        await slots.acquire()
        try:
            session = self._ensure_session()
            async with asyncio.timeout(timeout):
                async with session.request(
                    method, url, params=params, data=body, headers=headers
                ) as response:
                    data = await response.read()
                    status = response.status
                    resp_headers = response.headers
        except TimeoutError:
            raise ClientTimeoutError(
                f"no answer from {url} within {timeout:g}s; the broker may be overloaded "
                f"or unreachable"
            ) from None
        except aiohttp.ClientConnectorError as exc:
            raise BrokerConnectionError(
                f"cannot connect to {_origin(url)} ({_os_reason(exc)}); check that a broker is "
                f"running there and that --url / SLUICE_URL points at it",
                url=url,
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise BrokerConnectionError(
                f"connection to {_origin(url)} failed during the request "
                f"({type(exc).__name__}: {exc})",
                url=url,
            ) from None
        finally:
            slots.release()
        if status >= 400:
            raise BrokerError.from_response(status, data, url)
        return HttpResponse(status, resp_headers, data)

    async def get_json(self, url: str, params: Mapping[str, Any] | None = None) -> Any:
        return (await self.request("GET", url, params=params)).json()

    async def websocket(
        self, url: str, params: Mapping[str, Any] | None = None
    ) -> aiohttp.ClientWebSocketResponse:
        """Open a WebSocket (``http://`` URL, bearer auth on the upgrade request). A refused
        upgrade raises ``BrokerError`` with the code its HTTP status stands for."""
        session = self._ensure_session()
        try:
            async with asyncio.timeout(self.request_timeout_s):
                return await session.ws_connect(
                    url, params=params, autoping=True, heartbeat=None, max_msg_size=0
                )
        except TimeoutError:
            raise ClientTimeoutError(
                f"no WebSocket upgrade from {url} within {self.request_timeout_s:g}s"
            ) from None
        except aiohttp.WSServerHandshakeError as exc:
            raise BrokerError.from_response(exc.status, str(exc.message).encode(), url) from None
        except aiohttp.ClientConnectorError as exc:
            raise BrokerConnectionError(
                f"cannot connect to {_origin(url)} ({_os_reason(exc)}); check that a broker is "
                f"running there and that --url / SLUICE_URL points at it",
                url=url,
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise BrokerConnectionError(
                f"WebSocket to {_origin(url)} failed ({type(exc).__name__}: {exc})", url=url
            ) from None


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if rest else url


def _os_reason(exc: aiohttp.ClientConnectorError) -> str:
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    if os_error is not None and getattr(os_error, "strerror", None):
        return str(os_error.strerror).lower()
    return str(exc)
