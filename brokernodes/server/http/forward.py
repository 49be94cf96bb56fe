"""One front door: calls for a partition this broker does not lead go on to its leader.

Any broker accepts any REST call (produce, fetch, list offsets) for any partition. The
handlers take the decision only where they would have answered ``NOT_LEADER_OR_FOLLOWER``, so
a broker that leads the partition pays nothing for it. The forward:

- goes once: it carries ``Sluice-Forwarded: <this broker's id>``, and a request with that
  mark is never forwarded again (the leader with stale metadata answers 421, which the
  caller retries);
- carries the caller's ``Authorization``, ``Content-Type`` and ``Accept`` and the body bytes
  as they came; the leader checks the key, the ACLs and the quotas again (this broker has
  already authenticated the caller, so nothing unauthenticated is forwarded);
- passes back the leader's status, body and the headers that matter (``Content-Type``,
  ``Retry-After``, ``Sluice-*``);
- is retried here only when nothing reached the leader (the connection was refused): after
  a short wait, to the leader the metadata names then. Once bytes were sent, a lost answer
  is ``503 NETWORK_EXCEPTION`` (the outcome is unknown; never sent twice from here). No
  leader to send to is ``503 LEADER_NOT_AVAILABLE``. Both are retriable.

The HTTP client is the lean keep-alive client of ``server/lean_client.py`` (connections to
each leader kept while idle less than ``KEEPALIVE_S``, well inside the leader's own idle
limit); broker URLs that are not plain ``http://host:port`` go through one pooled
``aiohttp.ClientSession``. WebSocket upstreams (``ws/upstream.py``) use a session of their own.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import Counter

from brokernodes.errors import SluiceError
from brokernodes.server.lean_client import LeanClient, NotSent, plain_http
from brokernodes.server.protocol.forwarding import (
    FORWARDED_HEADER,
    REQUEST_HEADERS,
    ForwardOutcomeUnknownError,
    LeaderNotAvailableError,
    Outcome,
    batch_outcomes,
    entry_json,
    passed_back,
)
from brokernodes.server.replica.manager import PartitionLedElsewhereError

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker, EntryResult
    from brokernodes.server.protocol.request import SluiceRequest

CONNECT_TIMEOUT_S = 3.0
CONNECT_ATTEMPTS = 4  # a refused connection: retried after 0.1, 0.2, 0.3 s
RETRY_STEP_S = 0.1
KEEPALIVE_S = 30.0
POOL_PER_LEADER = 256

_forwarders: weakref.WeakKeyDictionary[Broker, Forwarder] = weakref.WeakKeyDictionary()


def forwarder(broker: Broker) -> Forwarder:
    """The broker's forwarder (made on first use)."""
    fwd = _forwarders.get(broker)
    if fwd is None:
        fwd = _forwarders[broker] = Forwarder(broker)
    return fwd


@functools.lru_cache(maxsize=256)
def _plain_http(url: str) -> tuple[str, int] | None:
    """(host, port) of an ``http://host:port`` broker URL, for the lean client; None for
    anything else (TLS, a path prefix), which goes through aiohttp's client."""
    peer = plain_http(url)
    return peer[:2] if peer is not None and peer[2] in ("", "/") else None


def forwardable(request: Any) -> bool:
    """A request that was not forwarded to this broker already (forwarded at most once)."""
    return FORWARDED_HEADER not in request.headers


class Forwarder:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._session: aiohttp.ClientSession | None = None
        self._ws_session: aiohttp.ClientSession | None = None
        self.lean = LeanClient(idle_s=KEEPALIVE_S, connect_timeout_s=CONNECT_TIMEOUT_S)
        # sluice_forwarded_requests_total{outcome}: answered (by the other broker, whatever
        # its status), leader_not_available (nothing sent), outcome_unknown (answer lost)
        forwarded = Counter(
            "sluice_forwarded_requests",
            "Calls forwarded to another broker (the partition's leader, or the broker holding "
            "a consumer instance), by outcome",
            ["outcome"],
            registry=broker.metrics.registry,
        )
        self.answered = forwarded.labels("answered")
        self.not_sent = forwarded.labels("leader_not_available")
        self.unknown = forwarded.labels("outcome_unknown")

    def session(self) -> aiohttp.ClientSession:
        s = self._session
        if s is None or s.closed:
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=POOL_PER_LEADER, keepalive_timeout=KEEPALIVE_S
            )
            s = self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
                auto_decompress=False,
                # the caller's own headers only: no type for a body that had none
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return s

    def ws_session(self) -> aiohttp.ClientSession:
        """The WebSocket streams' upstreams: apart from the request pool, which a stream
        would hold a connection of for its life."""
        s = self._ws_session
        if s is None or s.closed:
            s = self._ws_session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                skip_auto_headers=("User-Agent",),
            )
        return s

    async def close(self) -> None:
        await self.lean.close()
        for s in (self._session, self._ws_session):
            if s is not None:
                await s.close()
        self._session = self._ws_session = None

    def read_timeout_s(self) -> float:
        """How long a forwarded request may wait for its answer: a long poll or an acks=all
        wait on the leader, and some more."""
        c = self.broker.config
        return c.max_wait_ms / 1000 + c.acks_all_timeout_s + 10.0

    # --- the exchange --------------------------------------------------------------------

    def leader_target(self, topic: str, partition: int) -> tuple[int, str]:
        image = self.broker.image
        leader = image.partition(topic, partition).leader
        url = image.broker_url(leader) if leader >= 0 else None
        if url is None:
            raise LeaderNotAvailableError(
                f"{topic}-{partition} has no leader right now (an election is under way); "
                "retry shortly"
            )
        if leader == image.broker_id:
            raise LeaderNotAvailableError(
                f"leadership of {topic}-{partition} is moving to this broker; retry shortly"
            )
        return leader, url

    def broker_target(self, broker_id: int) -> tuple[int, str]:
        url = self.broker.image.broker_url(broker_id)
        if url is None or broker_id == self.broker.image.broker_id:
            raise LeaderNotAvailableError(f"broker {broker_id} is not in the metadata; retry")
        return broker_id, url

    async def exchange(
        self,
        method: str,
        path_qs: str,
        headers: dict[str, str],
        body: bytes | bytearray | None,
        *,
        idempotent: bool,
        target: Callable[[], tuple[int, str]],
        what: str,
    ) -> tuple[int, Any, bytes]:
        """Send one request to the broker ``target()`` names (asked again before a retry,
        as the metadata may have moved on): (status, headers, body). Raises
        ``LeaderNotAvailableError`` (nothing was sent) or ``ForwardOutcomeUnknownError``."""
        headers[FORWARDED_HEADER] = str(self.broker.image.broker_id)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=self.read_timeout_s()
        )
        lost_once = False
        for attempt in range(CONNECT_ATTEMPTS):
            broker_id, url = target()
            try:
                peer = _plain_http(url)
                if peer is not None:  # the lean client (server/lean_client.py)
                    answer = await self.lean.request(
                        method,
                        peer[0],
                        peer[1],
                        path_qs,
                        headers.items(),
                        body,
                        read_timeout_s=timeout.sock_read,  # type: ignore[arg-type]
                    )
                else:
                    async with self.session().request(
                        method, url + path_qs, data=body or None, headers=headers, timeout=timeout
                    ) as resp:
                        answer = resp.status, list(resp.headers.items()), await resp.read()
                self.answered.inc()
                return answer
            except (aiohttp.ClientConnectorError, NotSent):
                # nothing reached it: wait for it, or for the metadata to name another
                if attempt + 1 < CONNECT_ATTEMPTS:
                    await asyncio.sleep(RETRY_STEP_S * (attempt + 1))
                    continue
                self.not_sent.inc()
                raise LeaderNotAvailableError(
                    f"{what} (broker {broker_id}) cannot be reached and no other is known "
                    "yet; nothing was sent: retry shortly"
                ) from None
            except (aiohttp.ClientError, TimeoutError, OSError, asyncio.IncompleteReadError):
                if idempotent and not lost_once:  # a read changes nothing: ask once more
                    lost_once = True
                    continue
                self.unknown.inc()
                raise ForwardOutcomeUnknownError(
                    f"{what} (broker {broker_id}) failed or went away after the request was "
                    "sent to it; it may or may not have been applied: retry (an idempotent "
                    "producer's retry is never stored twice)"
                ) from None
        raise LeaderNotAvailableError(f"{what} cannot be reached; retry shortly")

    # --- whole requests ------------------------------------------------------------------

    async def forward(
        self,
        request: SluiceRequest,
        topic: str,
        partition: int,
        body: bytes | bytearray | None = None,
    ) -> web.Response:
        """The request as it came, answered by the partition's leader."""
        return await self.forward_to(
            request,
            lambda: self.leader_target(topic, partition),
            f"the leader of {topic}-{partition}",
            body,
        )

    async def forward_to(
        self,
        request: Any,
        target: Callable[[], tuple[int, str]],
        what: str,
        body: bytes | bytearray | None = None,
        *,
        idempotent: bool | None = None,
    ) -> web.Response:
        """The request as it came, answered by the broker ``target()`` names. A lost answer
        is asked again once when ``idempotent`` (default: a GET)."""
        headers = {h: v for h in REQUEST_HEADERS if (v := request.headers.get(h)) is not None}
        query = request.query
        path_qs = quote(request.path, safe="/:@")
        if query:
            path_qs += "?" + urlencode(list(query.items()))
        status, resp_headers, data = await self.exchange(
            request.method,
            path_qs,
            headers,
            body,
            idempotent=request.method == "GET" if idempotent is None else idempotent,
            target=target,
            what=what,
        )
        return web.Response(body=data, status=status, headers=passed_back(resp_headers))

    # --- JSON records parsed here, some for partitions led elsewhere ---------------------

    async def produce_entries(
        self,
        topic: str,
        moved: Sequence[EntryResult],
        *,
        acks: int,
        authorization: str | None,
    ) -> None:
        """Records whose partitions are led elsewhere, sent to each leader as one
        ``records:batch`` naming their partitions (leaders in parallel); each result gets
        the leader's outcome."""
        by_leader: dict[int, list[EntryResult]] = {}
        for r in moved:
            info = self.broker.image.partition(topic, r.partition)  # type: ignore[arg-type]
            by_leader.setdefault(info.leader, []).append(r)
        await asyncio.gather(
            *(
                self._send_entries(topic, rs, acks=acks, authorization=authorization)
                for rs in by_leader.values()
            )
        )

    async def _send_entries(
        self,
        topic: str,
        results: list[EntryResult],
        *,
        acks: int,
        authorization: str | None,
    ) -> None:
        ids = [str(i) for i in range(len(results))]
        entries = [
            entry_json(r.entry, r.partition, i)  # type: ignore[arg-type]
            for r, i in zip(results, ids, strict=True)
        ]
        doc = {"entries": entries}
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        path = (
            f"/v3/clusters/{quote(self.broker.image.cluster_id, safe='')}/topics/"
            f"{quote(topic, safe='')}/records:batch?acks={'all' if acks == -1 else acks}"
        )
        first = results[0].partition
        try:
            status, _, data = await self.exchange(
                "POST",
                path,
                headers,
                orjson.dumps(doc),
                idempotent=False,
                target=lambda: self.leader_target(topic, first),  # type: ignore[arg-type]
                what=f"the leader of {topic}-{first}",
            )
            try:
                answer = orjson.loads(data) if data else None
            except orjson.JSONDecodeError:
                answer = None
            outcomes = batch_outcomes(answer, ids, status, f"broker leading {topic}")
        except SluiceError as e:
            outcomes = {i: Outcome(error=e) for i in ids}
        for r, i in zip(results, ids, strict=True):
            apply_outcome(r, outcomes[i])


def apply_outcome(result: EntryResult, outcome: Outcome) -> None:
    result.error = outcome.error
    if outcome.error is None:
        result.partition = outcome.partition
        result.offset = outcome.offset
        result.timestamp = outcome.timestamp


def led_elsewhere(error: BaseException | None) -> bool:
    """The lookup found the partition led by another broker (nothing was appended): the
    call may go on to the leader. ``NOT_LEADER_OR_FOLLOWER`` raised after an append (an
    acks=all wait that lost leadership) is answered, never forwarded (it would double)."""
    return error.__class__ is PartitionLedElsewhereError


def moved_results(results: Sequence[EntryResult]) -> list[EntryResult]:
    """The records that failed only because another broker leads their partition."""
    return [r for r in results if r.error.__class__ is PartitionLedElsewhereError]


async def produce_entries(
    broker: Broker,
    request: Any,
    topic: str,
    entries: Sequence[Any],
    *,
    acks: int,
    authorization: str | None,
) -> list[EntryResult]:
    """``broker.produce_entries``, with the records for partitions led elsewhere forwarded to
    their leaders (unless the request was forwarded here): the JSON batch produce's path."""
    results = await broker.produce_entries(topic, entries, acks=acks)
    if forwardable(request):
        moved = moved_results(results)
        if moved:
            await forwarder(broker).produce_entries(
                topic, moved, acks=acks, authorization=authorization
            )
    return results


def install(app: web.Application, broker: Broker) -> None:
    """Close the forwarder's connections when the app stops."""

    async def on_cleanup(_app: web.Application) -> None:
        fwd = _forwarders.get(broker)
        if fwd is not None:
            await fwd.close()

    app.on_cleanup.append(on_cleanup)
