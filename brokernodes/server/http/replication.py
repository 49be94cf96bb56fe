"""Broker-to-broker replication routes, authenticated with the cluster secret.

- The replica fetch is the ordinary binary fetch (``http.fetch``) with ``replica_id``,
  ``current_leader_epoch`` and ``broker_epoch``: ``authenticate_broker`` admits it.
- ``GET /internal/v1/replication/topics/{topic}/partitions/{partition}/offsets-for-leader-epoch
  ?replica_id=&current_leader_epoch=&leader_epoch=`` answers Kafka's OffsetsForLeaderEpoch:
  ``{"error_code", "leader_epoch", "end_offset", "log_start_offset", "log_end_offset"}``;
  fencing errors (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) come back in ``error_code``
  with 200, as Kafka's per-partition errors do; NOT_LEADER_OR_FOLLOWER is a 421.

Topics are named as in the broker's global image: the ``topic_id`` under the control plane,
the name with static metadata. Without a cluster secret (``SLUICE_CLUSTER_SECRET``) these
routes refuse everything: replication needs it in both modes (docs/replication.md).
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.errors import UnauthenticatedError
from brokernodes.replication.leader import answer_offsets_for_leader_epoch
from brokernodes.server.http.util import auth_header, json_response, topic_partition
from brokernodes.server.protocol.params import int_param

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker


def authenticate_broker(broker: Broker, request: web.Request) -> None:
    """Admit another broker of this cluster (``Authorization: Cluster <secret>``)."""
    secret = broker.config.cluster_secret
    given = (auth_header(request) or "").encode()
    if not secret or not hmac.compare_digest(given, f"Cluster {secret}".encode()):
        raise UnauthenticatedError(
            "replication requests need the cluster's credential (Authorization: Cluster "
            "<secret>); brokers read it from SLUICE_CLUSTER_SECRET"
            + ("" if secret else ", which this broker does not have")
        )


def add_routes(app: web.Application, broker: Broker) -> None:
    async def offsets_for_leader_epoch(request: web.Request) -> web.Response:
        authenticate_broker(broker, request)
        topic, p = topic_partition(request)
        q = request.query
        int_param(q, "replica_id", minimum=0)
        current = int_param(q, "current_leader_epoch", minimum=-1)
        requested = int_param(q, "leader_epoch", minimum=-1)
        partition = broker.replicas.get_partition(topic, p)  # 404 / 421
        ls = partition.leader_state
        log = partition.log
        assert ls is not None
        with log.lock:
            entries = log.leader_epoch_cache.entries
            leo = log.log_end_offset
            start = log.log_start_offset
        error, epoch, end = answer_offsets_for_leader_epoch(
            entries, leo, ls.leader_epoch, current, requested
        )
        return json_response(
            {
                "error_code": error,
                "leader_epoch": epoch,
                "end_offset": end,
                "log_start_offset": start,
                "log_end_offset": leo,
            }
        )

    app.router.add_get(
        "/internal/v1/replication/topics/{topic}/partitions/{partition}/offsets-for-leader-epoch",
        offsets_for_leader_epoch,
        name="offsets_for_leader_epoch",
    )
