"""The base of every Confluent view: the tenant choke point of ``/api/v1`` (API-key Bearer
or console session, roles, the organisation), Confluent's media types, and Confluent's error
body (``backend.restproxy.errors``)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from backend.core.exceptions import NotFound
from backend.restproxy.errors import confluent_body
from backend.restproxy.links import Links, base_url
from backend.tenancy.permissions import TenantAPIView


class KafkaV2JSONRenderer(JSONRenderer):
    """REST Proxy API v2's JSON media type (clients send it in Accept)."""

    media_type = "application/vnd.kafka.v2+json"


class KafkaJSONRenderer(JSONRenderer):
    """The version-less media type v2 also accepts."""

    media_type = "application/vnd.kafka+json"


class ClusterNotFound(NotFound):
    pass


@extend_schema(exclude=True)  # Confluent's API reference documents these (docs/rest-proxy.md)
class ConfluentView(TenantAPIView):
    """A tenant-scoped view answering Confluent's shapes."""

    renderer_classes = [JSONRenderer]

    def handle_exception(self, exc):
        response = super().handle_exception(exc)  # Sluice's handler decides the refusal
        if response.status_code >= 400 and isinstance(response.data, dict):
            status, body = confluent_body(response.status_code, response.data, exc)
            response.data = body
            response.status_code = status
        return response

    def links(self) -> Links:
        return Links(base_url(self.request), settings.SLUICE_CLUSTER_ID)


class ClusterView(ConfluentView):
    """A view under ``/v3/clusters/{cluster_id}``: any other cluster id is 404."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        cluster_id = kwargs.get("cluster_id")
        if cluster_id != settings.SLUICE_CLUSTER_ID:
            raise ClusterNotFound(
                f"cluster {cluster_id!r} is not this one; GET /v3/clusters names this "
                f"cluster's id ({settings.SLUICE_CLUSTER_ID!r})"
            )


class V2View(ConfluentView):
    """A REST Proxy API v2 read: answers ``application/vnd.kafka.v2+json``."""

    renderer_classes = [KafkaV2JSONRenderer, KafkaJSONRenderer, JSONRenderer]


def no_content() -> Response:
    return Response(status=204)
