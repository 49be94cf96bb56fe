"""The live tail: a Channels WebSocket the browser opens at ``/ws/console/tail``.

- Authenticated by the Django session (``AuthMiddlewareStack``); the Origin's host is checked
  by ``AllowedHostsOriginValidator`` in ``backend/asgi.py``, then here exactly (scheme, host
  and port: ``backend.console.origins``), so another port of the same host is refused.
- Tenant-scoped: the organisation is the one selected in the session (else the user's only
  membership), and the topic is looked up in it; any role may tail (it is a read).
- ``partition=N`` tails one partition; without it (or ``partition=all``) every partition, at
  most ``MAX_PARTITIONS`` (a bigger topic is refused with 4400: the page offers one
  partition at a time there).
- Upstream it opens each partition leader's ``/sluice/v1/ws/consume`` stream with the
  organisation's console key (first-message auth) and forwards each records message as
  ``{"type": "records", "partition", "records": [...], "high_watermark"}``. Flow control is
  the broker's credit: each stream keeps its share of ``WINDOW`` bytes granted (at least
  ``MIN_CREDIT``) and gives back what each message used, so a paused browser
  (``{"pause": true}``) stops the brokers sending within one window.
- When the browser goes away (tab closed, navigation) ``disconnect`` cancels the upstream
  tasks, which close the broker streams: nothing keeps reading for nobody. One stream ending
  (its broker failed or went away) closes the tail with the partition and the reason.

- While open, the person's access is asked again every ``RECHECK_S`` seconds
  (``access.read_access_problem``): removed from the organisation, a role that cannot read,
  the account or the organisation deactivated close the tail with the reason.

Close codes to the browser: 4401 not signed in, 4400 bad query, 4404 no such topic or
partition, 4403 another origin or the console key disabled, 4410 access ended while open (the
reason comes first in a ``closed`` message), 4502 the broker failed or went away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from urllib.parse import parse_qs, urlencode

import aiohttp
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from backend.console.origins import origin_allowed
from backend.core.exceptions import ApplicationError

logger = logging.getLogger(__name__)
WINDOW = 256 * 1024
MIN_CREDIT = 32 * 1024
MAX_PARTITIONS = 64
ACCESS_ENDED = 4410


def recheck_seconds() -> float:
    from django.conf import settings

    return float(getattr(settings, "SLUICE_CONSOLE_TAIL_RECHECK_S", 3.0))


@database_sync_to_async
def _resolve(user, session, topic_name: str, partition: int | None):
    """({partition: leader URL}, console token, organisation id) for this user's current
    organisation (every partition when ``partition`` is None), or raise."""
    from backend.console import brokers
    from backend.console.credentials import console_token
    from backend.tenancy import selectors
    from backend.tenancy.permissions import SESSION_ORGANISATION_KEY
    from backend.topics import selectors as topic_selectors

    membership = None
    ref = session.get(SESSION_ORGANISATION_KEY) if session is not None else None
    if ref:
        org = selectors.organisation_lookup(ref)
        membership = selectors.membership_for(user=user, organisation=org) if org else None
    if membership is None:
        ms = list(selectors.membership_list_for_user(user=user)[:2])
        if len(ms) != 1:
            raise ApplicationError("select an organisation first")
        membership = ms[0]
    topic = topic_selectors.topic_get(organisation=membership.organisation, name=topic_name)
    if partition is not None and not 0 <= partition < topic.partitions:
        raise ApplicationError(f"{topic_name!r} has no partition {partition}")
    if partition is None and topic.partitions > MAX_PARTITIONS:
        raise ApplicationError(
            f"{topic_name!r} has {topic.partitions} partitions; the live tail follows at most "
            f"{MAX_PARTITIONS} at once: choose one"
        )
    chosen = [partition] if partition is not None else range(topic.partitions)
    org = membership.organisation
    return {p: brokers.leader_url(topic, p) for p in chosen}, console_token(org), org.pk


@database_sync_to_async
def _access_problem(user_id, organisation_id) -> str | None:
    from backend.console.access import read_access_problem

    return read_access_problem(user_id=user_id, organisation_id=organisation_id)


class LiveTailConsumer(AsyncJsonWebsocketConsumer):
    upstreams: list[asyncio.Task] = []
    watcher: asyncio.Task | None = None
    paused = False

    async def connect(self):
        self.streams: dict[int, aiohttp.ClientWebSocketResponse] = {}
        self.owed: dict[int, int] = {}
        self.upstreams = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if not origin_allowed(self.scope, settings.CSRF_TRUSTED_ORIGINS):
            await self.close(code=4403)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        topic = (query.get("topic") or [""])[0]
        start = (query.get("from") or ["latest"])[0]
        raw = (query.get("partition") or ["all"])[0]
        try:
            partition = None if raw == "all" else int(raw)
        except ValueError:
            partition = -1
        if not topic or (partition is not None and partition < 0):
            await self.close(code=4400)
            return
        if start not in ("latest", "earliest"):
            await self.close(code=4400)
            return
        try:
            leaders, token, org_id = await _resolve(
                user, self.scope.get("session"), topic, partition
            )
        except ApplicationError as e:
            await self.close(code=4000 + (e.status_code if e.status_code < 600 else 502))
            return
        await self.accept()
        credit = max(MIN_CREDIT, WINDOW // len(leaders))
        for p, url in leaders.items():
            q = urlencode({"topic": topic, "partition": p, "from": start, "format": "json"})
            target = url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
            self.upstreams.append(
                asyncio.create_task(
                    self.pump(f"{target}/sluice/v1/ws/consume?{q}", token, p, credit)
                )
            )
        self.watcher = asyncio.create_task(self.watch(user.pk, org_id))
        await self.send_json(
            {"type": "open", "topic": topic, "partitions": sorted(leaders), "partition": partition}
        )

    async def pump(self, url: str, token: str, partition: int, credit: int) -> None:
        reason = "the broker closed the stream"
        try:
            timeout = aiohttp.ClientTimeout(total=None, connect=10)
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.ws_connect(url, heartbeat=20) as ws,
            ):
                self.streams[partition] = ws
                await ws.send_str(json.dumps({"auth": token}))
                await ws.send_str(json.dumps({"credit": credit}))
                async for msg in ws:
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                    doc = json.loads(msg.data)
                    if "error_code" in doc:
                        reason = doc.get("message") or doc["error_code"]
                        break
                    used = int(doc.get("batch_bytes") or 0)
                    if doc.get("records"):
                        await self.send_json(
                            {
                                "type": "records",
                                "partition": partition,
                                "records": [{"partition": partition, **r} for r in doc["records"]],
                                "high_watermark": doc.get("high_watermark"),
                            }
                        )
                    if self.paused:
                        self.owed[partition] = self.owed.get(partition, 0) + used
                    elif used:
                        await ws.send_str(json.dumps({"credit": used}))
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, OSError, ValueError) as e:
            reason = f"cannot read from the broker: {e}"
        finally:
            self.streams.pop(partition, None)
        with contextlib.suppress(Exception):
            await self.send_json({"type": "closed", "message": f"partition {partition}: {reason}"})
            await self.close(code=4502)

    async def watch(self, user_id, organisation_id) -> None:
        """Ask again whether the person may read; when not, stop the broker stream and close
        with the reason."""
        period = recheck_seconds()
        while True:
            await asyncio.sleep(period)
            try:
                problem = await _access_problem(user_id, organisation_id)
            except Exception:  # a database hiccup is not a revocation: ask again next time
                logger.warning("live tail: access re-check failed", exc_info=True)
                continue
            if problem is None:
                continue
            await self._stop_upstreams()
            with contextlib.suppress(Exception):
                await self.send_json({"type": "closed", "message": f"Live tail closed: {problem}."})
                await self.close(code=ACCESS_ENDED)
            return

    async def receive_json(self, content, **kwargs):
        if not isinstance(content, dict) or "pause" not in content:
            return
        self.paused = bool(content["pause"])
        if self.paused:
            return
        for partition, ws in list(self.streams.items()):
            owed = self.owed.pop(partition, 0)
            if owed and not ws.closed:
                await ws.send_str(json.dumps({"credit": owed}))

    async def _stop_upstreams(self) -> None:
        for task in self.upstreams:
            task.cancel()
        for task in self.upstreams:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def disconnect(self, code):
        if self.watcher is not None and self.watcher is not asyncio.current_task():
            self.watcher.cancel()
        await self._stop_upstreams()
