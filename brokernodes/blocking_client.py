"""The one blocking HTTP client to the brokers, for callers without an event loop: the control
plane's views (console, consumer groups) and the Spark executors.

These callers make a few requests per page or per offset range, so this is ``http.client``
with keep-alive connections kept per broker, not the async SDK. It sits beside
``brokernodes.client`` rather than in it: importing that package loads aiohttp and the whole
async SDK, which an executor reading one range should not pay for (a contract in
``pyproject.toml`` keeps it so).

One place for:

- **timeouts**: the named values below, per socket operation (connect, each read);
- **credentials**: ``bearer`` (a tenant's API key) and ``cluster`` (the cluster secret: the
  operators' and the control plane's credential) build the ``Authorization`` value;
  ``authorization`` takes exactly one of the two;
- **errors**: every failure is one of ``brokernodes.errors``' client errors: ``BrokerError``
  (the broker answered 4xx/5xx; its ``error_code``, or the code its status stands for),
  ``BrokerConnectionError`` (nothing answered or the connection broke) and
  ``ClientTimeoutError`` (no answer in time);
- **retries**: a GET on a kept-alive connection the broker has closed meanwhile is sent once
  more on a new one; ``Retry`` asks again while the broker answers named codes, for a while;
- **asking several brokers**: ``first_answer`` (one after another until one answers) and
  ``ask_every`` (all at once under one deadline; answers and failures per broker, for the
  caller to merge).
"""

from __future__ import annotations

import http.client
import json as jsonlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientTimeoutError,
)

__all__ = [
    "FAILOVER_TIMEOUT_S",
    "INTERACTIVE_TIMEOUT_S",
    "REQUEST_TIMEOUT_S",
    "BlockingClient",
    "Response",
    "Retry",
    "answer_error",
    "ask_every",
    "authorization",
    "bearer",
    "cluster",
    "first_answer",
    "request",
    "split_url",
    "unreachable",
]

# Timeouts (seconds, per socket operation), by what waits on the answer.
REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms: jobs reading up to a fetch's bytes
INTERACTIVE_TIMEOUT_S = 10.0  # a person waits on a page (the console)
FAILOVER_TIMEOUT_S = 5.0  # asked broker after broker: a silent one costs at most this
MAX_ASKERS = 8  # threads ``ask_every`` runs at once
USER_AGENT = "sluice-blocking/0.1"
IDEMPOTENT = frozenset({"GET", "HEAD"})

K = TypeVar("K")
T = TypeVar("T")


def bearer(api_key: str) -> str:
    """The ``Authorization`` value of a tenant's API key."""
    return f"Bearer {api_key}"


def cluster(secret: str) -> str:
    """The ``Authorization`` value of the cluster secret (operators, the control plane)."""
    return f"Cluster {secret}"


def authorization(api_key: str | None = None, cluster_secret: str | None = None) -> str:
    """The ``Authorization`` value for exactly one of an API key and the cluster secret."""
    if bool(api_key) == bool(cluster_secret):
        raise ValueError("give exactly one of an API key and the cluster secret")
    return bearer(api_key) if api_key else cluster(cluster_secret or "")


def split_url(url: str) -> tuple[str, str]:
    """``http://host:port/path?q`` -> (``http://host:port``, ``/path?q``); a bare
    ``host:port`` means http. Anything but http(s) is a ValueError naming the URL."""
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"broker URL {url!r} must be http:// or https://")
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}", path + (f"?{parts.query}" if parts.query else "")


class Response(NamedTuple):
    """A 2xx answer; header names are lower-case."""

    status: int
    headers: dict[str, str]
    body: bytes
    url: str

    def json(self) -> Any:
        """The body as JSON (``{}`` when empty); a body that is not JSON is a BrokerError."""
        if not self.body:
            return {}
        try:
            return jsonlib.loads(self.body)
        except ValueError:
            raise BrokerError(
                "UNKNOWN_SERVER_ERROR",
                f"{split_url(self.url)[0]} answered {self.status} with a body that is not JSON",
                status=self.status,
                url=self.url,
            ) from None


def answer_error(status: int, body: bytes, url: str) -> BrokerError:
    """The ``BrokerError`` for an error answer: the broker's code, message and other fields
    (``details``); an answer without a code (a proxy's, say) gets the code its status stands
    for and the message "the broker answered <status>"."""
    try:
        doc = jsonlib.loads(body) if body else None
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        message = str(doc.get("message") or f"the broker answered {status}")
        code = doc.get("error_code")
        if isinstance(code, str) and code:
            details = {k: v for k, v in doc.items() if k not in ("error_code", "message")}
            return BrokerError(code, message, status=status, url=url, details=details)
    else:
        text = body[:200].decode("utf-8", "replace").strip()
        message = f"the broker answered {status}" + (f": {text}" if text else "")
    code = BrokerError.from_response(status, b"", url).error_code  # errors.py's status table
    return BrokerError(code, message, status=status, url=url)


@dataclass(frozen=True)
class Retry:
    """Ask again while the broker answers one of ``codes``, for at most ``within_s``."""

    codes: frozenset[str]
    within_s: float
    backoff_s: float = 0.1


class BlockingClient:
    """Requests to any broker with one credential; idle keep-alive connections are kept per
    broker (``http.client``). Safe to share between threads: a connection serves one request
    at a time. ``close`` (or ``with``) closes the idle ones."""

    def __init__(
        self,
        authorization: str | None = None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.timeout_s = timeout_s
        self._headers = {"User-Agent": user_agent}
        if authorization:
            self._headers["Authorization"] = authorization
        self._idle: dict[str, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def request(
        self, method: str, url: str, *, json: Any = None, retry: Retry | None = None
    ) -> Response:
        """One request (``json``: a body to send as JSON); a 2xx ``Response`` or one of the
        errors above. With ``retry``, the listed error codes are asked again until its time is
        up, then raised."""
        deadline = time.monotonic() + (retry.within_s if retry else 0.0)
        while True:
            try:
                return self._send(method, url, json)
            except BrokerError as e:
                if retry is None or e.error_code not in retry.codes:
                    raise
                if time.monotonic() + retry.backoff_s > deadline:
                    raise
                time.sleep(retry.backoff_s)

    def get_json(self, url: str, *, retry: Retry | None = None) -> Any:
        return self.request("GET", url, retry=retry).json()

    def _send(self, method: str, url: str, json: Any) -> Response:
        origin, path = split_url(url)
        headers = dict(self._headers)
        body = None
        if json is not None:
            body = jsonlib.dumps(json).encode()
            headers["Content-Type"] = "application/json"
        where = f"{method} {path.split('?', 1)[0]}"
        for attempt in (0, 1):
            conn = self._checkout(origin)
            reused = conn.sock is not None
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError:
                conn.close()
                raise ClientTimeoutError(
                    f"no answer from the broker at {origin} to {where} within "
                    f"{self.timeout_s:g} s (timed out)"
                ) from None
            except (http.client.HTTPException, OSError) as e:
                conn.close()
                if reused and attempt == 0 and method in IDEMPOTENT:
                    continue  # a kept-alive connection the broker closed meanwhile
                verb = "lost the connection to" if reused else "cannot reach"
                raise BrokerConnectionError(
                    f"{verb} the broker at {origin}: {str(e) or type(e).__name__}", url=url
                ) from None
            if resp.will_close:
                conn.close()
            else:
                self._checkin(origin, conn)
            if resp.status >= 400:
                raise answer_error(resp.status, data, url)
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, url)
        raise AssertionError("unreachable")

    def _checkout(self, origin: str) -> http.client.HTTPConnection:
        with self._lock:
            idle = self._idle.get(origin)
            if idle:
                return idle.pop()
        host_port = origin.split("://", 1)[1]
        if origin.startswith("https://"):
            return http.client.HTTPSConnection(host_port, timeout=self.timeout_s)
        return http.client.HTTPConnection(host_port, timeout=self.timeout_s)

    def _checkin(self, origin: str, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(origin, []).append(conn)


def request(
    method: str,
    url: str,
    *,
    authorization: str | None = None,
    json: Any = None,
    timeout_s: float = REQUEST_TIMEOUT_S,
    retry: Retry | None = None,
) -> Response:
    """One request on a connection of its own (closed after), for callers that ask once."""
    with BlockingClient(authorization, timeout_s=timeout_s) as client:
        return client.request(method, url, json=json, retry=retry)


def unreachable(error: Exception) -> bool:
    """The broker did not answer at all (the next one may)."""
    return isinstance(error, BrokerConnectionError | ClientTimeoutError)


def first_answer(
    urls: Iterable[str],
    ask: Callable[[str], T],
    *,
    move_on: Callable[[Exception], bool] = unreachable,
) -> T:
    """``ask(url)`` of each broker in turn until one answers (Kafka's walk of the bootstrap
    list). A failure ``move_on`` accepts tries the next broker; any other is raised. When none
    answers, the last failure is raised (a BrokerConnectionError when there was no URL)."""
    last: Exception | None = None
    for url in urls:
        try:
            return ask(url)
        except Exception as e:
            if not move_on(e):
                raise
            last = e
    raise last or BrokerConnectionError("no broker to ask")


def ask_every(
    targets: Mapping[K, str],
    ask: Callable[[str], T],
    *,
    deadline_s: float,
    max_askers: int = MAX_ASKERS,
) -> tuple[dict[K, T], dict[K, Exception]]:
    """``ask(url)`` of every broker at once (a thread each, at most ``max_askers``), waiting
    at most ``deadline_s`` for all: ``(answers, failures)`` by the targets' keys, in their
    order. A broker still silent at the deadline fails with ClientTimeoutError("no answer
    within ..."); its request is left to its own socket timeout, so one stalled broker costs
    the caller at most the deadline."""
    if not targets:
        return {}, {}
    pool = ThreadPoolExecutor(max_workers=min(max_askers, len(targets)))
    try:
        futures = {key: pool.submit(ask, url) for key, url in targets.items()}
        wait_for(futures.values(), timeout=deadline_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    answers: dict[K, T] = {}
    failures: dict[K, Exception] = {}
    for key, future in futures.items():
        if not future.done() or future.cancelled():
            failures[key] = ClientTimeoutError(f"no answer within {deadline_s:g} s")
        elif (error := future.exception()) is not None:
            failures[key] = error if isinstance(error, Exception) else RuntimeError(str(error))
        else:
            answers[key] = future.result()
    return answers, failures
