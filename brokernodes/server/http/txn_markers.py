"""Broker-to-broker transaction routes, authenticated with the cluster secret.

- ``POST /internal/v1/transactions/markers`` ``{"markers": [{"log_key", "partition",
  "producer_id", "producer_epoch", "commit", "coordinator_epoch"}]}``: a transaction
  coordinator on another broker asks this one to write markers to partitions it leads.
  Answers ``{"results": [{"offset"} | {"error"}]}`` in the same order; the coordinator
  retries the failed ones (docs/transactions.md).
- ``POST /internal/v1/transactions/verify`` ``{"transactional_id", "producer_id",
  "producer_epoch", "partitions": [[topic, partition]]}``: a partition leader asks the
  coordinator whether a transactional batch's partitions are in the ongoing transaction.
  Answers ``{"errors": [null | Kafka's error name]}``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.errors import InvalidRequestError, SluiceError
from brokernodes.server.http.body import read_body
from brokernodes.server.http.replication import authenticate_broker
from brokernodes.server.http.util import json_response
from brokernodes.server.transactions.markers import ROUTE, VERIFY_ROUTE, Marker

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

MAX_BODY = 4 * 1024 * 1024


async def _json(request: web.Request) -> dict:
    raw = await read_body(request, max_bytes=MAX_BODY, timeout=30)
    try:
        body = json.loads(raw)
    except ValueError:
        raise InvalidRequestError("the body must be JSON") from None
    if not isinstance(body, dict):
        raise InvalidRequestError("the body must be a JSON object")
    return body


def add_routes(app: web.Application, broker: Broker) -> None:
    async def markers(request: web.Request) -> web.Response:
        authenticate_broker(broker, request)
        body = await _json(request)
        try:
            wanted = [Marker.from_json(m) for m in body["markers"]]
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidRequestError(f"malformed markers: {e}") from None
        results = []
        for m in wanted:
            try:
                offset = await broker.transactions.markers.apply(m)
                results.append({"offset": offset})
            except Exception as e:  # per marker: the coordinator retries this one
                code = e.error_code if isinstance(e, SluiceError) else type(e).__name__
                results.append({"error": code, "message": str(e)})
        return json_response({"results": results})

    async def verify(request: web.Request) -> web.Response:
        authenticate_broker(broker, request)
        body = await _json(request)
        try:
            qualified = str(body["transactional_id"])
            pid, epoch = int(body["producer_id"]), int(body["producer_epoch"])
            tps = [(str(t), int(p)) for t, p in body["partitions"]]
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidRequestError(f"malformed verification: {e}") from None
        coordinator = broker.transactions
        shard = await coordinator.shard_for(qualified)  # NOT_COORDINATOR when moved
        meta = shard.txns.get(qualified)
        errors = [coordinator.check_produce(meta, pid, epoch, tp) for tp in tps]
        return json_response({"errors": errors})

    app.router.add_post(ROUTE, markers, name="txn_markers")
    app.router.add_post(VERIFY_ROUTE, verify, name="txn_verify")
