"""Health, readiness, Prometheus metrics, cluster metadata and InitProducerId."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from brokernodes.errors import UnauthenticatedError
from brokernodes.server.http.open_txns import transaction_state
from brokernodes.server.http.util import BEFORE_METRICS_KEY, auth_header, json_response
from brokernodes.server.protocol.request import SluiceRequest

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

NO_TXN_STATE = {"last_stable_offset": None, "open_transactions": []}


def add_routes(app: web.Application, broker: Broker) -> None:
    async def healthz(request: SluiceRequest) -> web.Response:
        return json_response({"status": "ok"})

    async def readyz(request: SluiceRequest) -> web.Response:
        if broker.ready:
            return json_response({"status": "ready"})
        state = "stopping" if broker.stopping else "starting"
        return json_response({"status": state}, 503)

    async def metrics(request: SluiceRequest) -> web.Response:
        # Metrics name every tenant's topics: with the control plane they are for operators
        # (the cluster secret); a static-file broker (tests, benchmarks) keeps them open.
        secret = broker.config.cluster_secret
        if secret and not hmac.compare_digest(
            (auth_header(request) or "").encode(), f"Cluster {secret}".encode()
        ):
            raise UnauthenticatedError(
                "/metrics needs the operators' credential: Authorization: Cluster <secret>"
            )
        before = app.get(BEFORE_METRICS_KEY)
        if before is not None:
            before()
        return web.Response(
            body=broker.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def metadata(request: SluiceRequest) -> web.Response:
        broker.authorize(auth_header(request), "DESCRIBE", "cluster")
        image = broker.image
        topics = []
        for t in image.topics.values():
            parts = []
            for p in t.partitions:
                hosted = broker.replicas.partitions.get((p.log_key, p.partition))
                log = hosted.log if hosted is not None else None
                parts.append(
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "log_start_offset": log.log_start_offset if log else None,
                        "log_end_offset": log.log_end_offset if log else None,
                        "high_watermark": log.high_watermark if log else None,
                        **(transaction_state(hosted) if hosted is not None else NO_TXN_STATE),
                    }
                )
            topics.append(
                {
                    "name": t.name,
                    "topic_id": t.topic_id,
                    "configs": dict(t.configs),
                    "partitions": parts,
                }
            )
        return json_response(
            {
                "cluster_id": image.cluster_id,
                "broker_id": image.broker_id,
                "brokers": [{"id": b.id, "url": b.url} for b in image.brokers.values()],
                "topics": topics,
            }
        )

    async def producer_ids(request: SluiceRequest) -> web.Response:
        broker.authorize(auth_header(request), "IDEMPOTENT_WRITE", "cluster")
        pid, epoch = await broker.init_producer_id()
        return json_response({"producer_id": pid, "producer_epoch": epoch})

    app.router.add_get("/healthz", healthz, name="healthz")
    app.router.add_get("/readyz", readyz, name="readyz")
    app.router.add_get("/metrics", metrics, name="metrics")
    app.router.add_get("/sluice/v1/metadata", metadata, name="metadata")
    app.router.add_post("/sluice/v1/producer-ids", producer_ids, name="producer_ids")
