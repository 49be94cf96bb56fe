"""REST Proxy API v2's metadata reads (``GET /topics``, ``/topics/{name}``, its partitions,
``/brokers``), answered as ``application/vnd.kafka.v2+json``, over the same selectors.

``/topics`` and ``/brokers`` are also pages of the console (a single-page app served by the
control plane). A request that asks for HTML and carries no ``Authorization`` header is a
browser opening the console and gets the page; every other request is an API client's."""

from __future__ import annotations

from functools import wraps

from rest_framework.response import Response

from backend.cluster import selectors as cluster_selectors
from backend.console import spa
from backend.restproxy.base import V2View
from backend.restproxy.errors import UnknownTopicOrPartition
from backend.restproxy.topics import partition_state_of, topic_of
from backend.topics import selectors
from backend.topics.configs import effective_configs

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402


def wants_console(request) -> bool:
    accept = request.headers.get("Accept") or ""
    return "text/html" in accept and not request.headers.get("Authorization")


def console_or(view):
    """The console's page for a browser, else ``view`` (see the module docs)."""

    @wraps(view)
    def dispatch(request, *args, **kwargs):
        if request.method in ("GET", "HEAD") and wants_console(request):
            return spa.index(request)
        return view(request, *args, **kwargs)

    return dispatch


def _topic(organisation, name: str):
    try:
        return topic_of(organisation, name)
    except UnknownTopicOrPartition as e:
        e.confluent_code = TOPIC_NOT_FOUND
        raise


def _partition(state: dict) -> dict:
    isr = set(state["isr"])
    return {
        "partition": state["partition"],
        "leader": state["leader"],
        "replicas": [
            {"broker": b, "leader": b == state["leader"], "in_sync": b in isr}
            for b in state["replicas"]
        ],
    }


class TopicNamesApi(V2View):
    def get(self, request):
        return Response([t.name for t in selectors.topic_list(organisation=self.organisation)])


class TopicApi(V2View):
    def get(self, request, topic_name: str):
        topic = _topic(self.organisation, topic_name)
        return Response(
            {
                "name": topic.name,
                "configs": effective_configs(topic.configs),
                "partitions": [_partition(s) for s in selectors.topic_partition_states(topic)],
            }
        )


class PartitionsApi(V2View):
    def get(self, request, topic_name: str):
        topic = _topic(self.organisation, topic_name)
        return Response([_partition(s) for s in selectors.topic_partition_states(topic)])


class PartitionApi(V2View):
    def get(self, request, topic_name: str, partition_id: int):
        topic = _topic(self.organisation, topic_name)
        try:
            state = partition_state_of(topic, partition_id)
        except UnknownTopicOrPartition as e:
            e.confluent_code = PARTITION_NOT_FOUND
            raise
        return Response(_partition(state))


class BrokersApi(V2View):
    def get(self, request):
        return Response({"brokers": [b.broker_id for b in cluster_selectors.broker_list()]})
