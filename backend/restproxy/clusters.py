"""``/v3/clusters`` (this one cluster) and its brokers. Broker ids and addresses are
cluster-wide facts every client learns from Kafka's metadata anyway, so every tenant sees
them; the controller is the lowest live broker id, as the Kafka front reports it."""

from __future__ import annotations

from rest_framework.response import Response

from backend.cluster import selectors as cluster_selectors
from backend.core.exceptions import NotFound
from backend.restproxy import shapes
from backend.restproxy.base import ClusterView, ConfluentView


def _controller() -> int | None:
    live = cluster_selectors.live_broker_ids()
    return min(live) if live else None


def _broker(links, b) -> dict:
    host, port = shapes.host_port(b.kafka, b.url)
    return shapes.broker(links, b.broker_id, host, port)


class ClusterListApi(ConfluentView):
    def get(self, request):
        links = self.links()
        data = [shapes.cluster(links, _controller())]
        return Response(links.listing("KafkaClusterList", data))


class ClusterDetailApi(ClusterView):
    def get(self, request, cluster_id: str):
        return Response(shapes.cluster(self.links(), _controller()))


class BrokerListApi(ClusterView):
    def get(self, request, cluster_id: str):
        links = self.links()
        data = [_broker(links, b) for b in cluster_selectors.broker_list()]
        return Response(links.listing("KafkaBrokerList", data, "brokers"))


class BrokerDetailApi(ClusterView):
    def get(self, request, cluster_id: str, broker_id: int):
        b = cluster_selectors.broker_get(broker_id=broker_id)
        if b is None:
            raise NotFound(f"no broker {broker_id} in this cluster")
        return Response(_broker(self.links(), b))
