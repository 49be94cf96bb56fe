"""Stateless read cursors over HTTP: ``GET /sluice/v1/topics/{topic}/cursor`` and
``GET /sluice/v1/cursors/{cursor}``.

A cursor is a signed, opaque position over all of a topic's partitions
(``protocol/cursor.py``); each read returns records and the next cursor, and any broker can
serve it: partitions led elsewhere are read from their leaders with the caller's key. The
broker keeps nothing per cursor. A read with ``isolation=read_committed`` stops at each
partition's last stable offset and leaves aborted transactions' records out (the cursor
itself does not remember the isolation: each read says it).

``from=latest`` starts at each partition's high watermark, or with
``isolation=read_committed`` at its last stable offset, as a Kafka read_committed consumer
that resets to latest does: the records of a transaction open at that moment come once it
commits (starting at the high watermark would skip them for good). A ``from=<timestamp>``
start is capped the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

import orjson
from aiohttp import web

from brokernodes.errors import SluiceError
from brokernodes.server.http.forward import forwarder
from brokernodes.server.http.log_offsets import cluster_token, log_offsets
from brokernodes.server.http.util import auth_header, json_response
from brokernodes.server.protocol import cursor as cursors
from brokernodes.server.protocol.forwarding import error_from
from brokernodes.server.protocol.isolation import (
    aborted_skip,
    read_committed_param,
    stable_aborted,
)
from brokernodes.server.protocol.json_records import render_batches
from brokernodes.server.protocol.log_offsets import Query
from brokernodes.server.protocol.params import choice_param, int_param

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

CURSOR_MAX_RECORDS = 10_000


def add_routes(app: web.Application, broker: Broker) -> None:
    async def new_cursor(request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        auth = auth_header(request)
        principal = broker.authorize(auth, "READ", "topic", topic)
        info = broker.image.topic(topic)
        start = request.query.get("from", "earliest")
        read_committed = read_committed_param(request.query)
        ts = None
        if start not in ("earliest", "latest"):
            ts = int_param(request.query, "from", minimum=0)
        view = broker.image
        found = await log_offsets(
            broker,
            view,
            [Query(topic, p.partition, offset_at=ts) for p in info.partitions],
            auth,
        )
        pos = {}
        for p in info.partitions:
            lo = found.get((topic, p.partition))
            if lo is None:
                raise SluiceError(f"the leader of {topic}-{p.partition} did not answer; retry")
            end = lo.high_watermark
            if read_committed and lo.last_stable_offset is not None:
                end = lo.last_stable_offset
            if start == "earliest":
                pos[p.partition] = lo.log_start_offset
            elif start == "latest" or lo.offset_for_time is None:
                pos[p.partition] = end
            else:
                pos[p.partition] = min(lo.offset_for_time, end)
        c = cursors.Cursor(principal.tenant, topic, info.topic_id, pos)
        return json_response({"cursor": cursors.encode(c, cluster_token(broker))})

    async def read_partition(
        topic: str,
        partition: int,
        offset: int,
        limit: int,
        fmt: str,
        auth: str | None,
        read_committed: bool = False,
    ) -> tuple[list, int]:
        info = broker.image.partition(topic, partition)
        if info.leader == broker.image.broker_id:
            data = await broker.replicas.fetch(
                topic, partition, offset, max_bytes=1 << 20, read_committed=read_committed
            )
            skip = None
            if read_committed and data.slices:
                part = broker.replicas.get_partition(topic, partition)
                skip = aborted_skip(stable_aborted(part, offset)[1])
            return render_batches(data.read_bytes(), offset, fmt, max_records=limit, skip=skip)
        # read from the leader with the caller's key, over the forwarder's pooled connections
        path = (
            f"/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}/records"
            f"?offset={offset}&max_records={limit}&format={fmt}"
            + ("&isolation=read_committed" if read_committed else "")
        )
        fwd = forwarder(broker)
        status, _, data = await fwd.exchange(
            "GET",
            path,
            {"Authorization": auth or ""},
            None,
            idempotent=True,
            target=lambda: fwd.leader_target(topic, partition),
            what=f"the leader of {topic}-{partition}",
        )
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            doc = None
        if status != 200 or not isinstance(doc, dict):
            raise error_from(doc, status, f"the leader of {topic}-{partition}")
        return doc["records"], int(doc["next_offset"])

    async def read_cursor(request: web.Request) -> web.Response:
        auth = auth_header(request)
        c = cursors.decode(request.match_info["cursor"], cluster_token(broker))
        principal = broker.authorize(auth, "READ", "topic", c.topic)
        if principal.tenant != c.tenant:
            raise cursors.InvalidCursorError("this cursor belongs to another organisation")
        info = broker.image.topic(c.topic)
        if info.topic_id != c.topic_id:
            raise cursors.InvalidCursorError(
                f"topic {c.topic!r} was re-created since this cursor was made; ask for a new one"
            )
        limit = int_param(request.query, "max_records", 500, minimum=1, maximum=CURSOR_MAX_RECORDS)
        fmt = choice_param(request.query, "format", ("json", "text", "base64"), "json")
        read_committed = read_committed_param(request.query)
        pos = dict(c.positions)
        for p in info.partitions:
            pos.setdefault(p.partition, 0)  # partitions added since: from their start
        out = []
        for p in sorted(pos):
            if len(out) >= limit:
                break
            recs, nxt = await read_partition(
                c.topic, p, pos[p], limit - len(out), fmt, auth, read_committed
            )
            for r in recs:
                r["partition"] = p
            out.extend(recs)
            pos[p] = nxt
        nxt_cursor = cursors.encode(
            cursors.Cursor(c.tenant, c.topic, c.topic_id, pos), cluster_token(broker)
        )
        return json_response({"records": out, "next_cursor": nxt_cursor})

    r = app.router
    r.add_get("/sluice/v1/topics/{topic}/cursor", new_cursor, name="cursor_new")
    r.add_get("/sluice/v1/cursors/{cursor}", read_cursor, name="cursor_read")
