"""Internal routes for brokers (``/internal/v1/``), authenticated by the cluster secret.

Not part of the public API: excluded from the OpenAPI schema."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.cluster import metadata_log, selectors, services
from backend.cluster.authentication import ClusterSecretAuthentication, IsBroker
from backend.core.exceptions import NotFound
from backend.core.serializers import StrictSerializer, validate_input


class InternalAPIView(APIView):
    authentication_classes = [ClusterSecretAuthentication]
    permission_classes = [IsBroker]
    throttle_classes: list = []


@extend_schema(exclude=True)
class BrokerRegisterApi(InternalAPIView):
    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        url = serializers.URLField(max_length=500)

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        broker = services.broker_register(broker_id=data["broker_id"], url=data["url"])
        version, _ = metadata_log.head()
        return Response(
            {
                "cluster_id": settings.SLUICE_CLUSTER_ID,
                "broker_id": broker.broker_id,
                "version": version,
                "heartbeat_interval_ms": int(settings.SLUICE_BROKER_HEARTBEAT_INTERVAL_S * 1000),
            }
        )


@extend_schema(exclude=True)
class BrokerHeartbeatApi(InternalAPIView):
    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        metadata_version = serializers.IntegerField(min_value=0, required=False, default=0)

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        broker = selectors.broker_get(broker_id=data["broker_id"])
        if broker is None:
            raise NotFound("unknown broker: register first")
        services.broker_heartbeat(broker=broker, metadata_version=data["metadata_version"])
        return Response({"broker_id": broker.broker_id, "live": True})


@extend_schema(exclude=True)
class MetadataApi(InternalAPIView):
    class FilterSerializer(StrictSerializer):
        since = serializers.IntegerField(min_value=0, required=False, default=0)
        wait_ms = serializers.IntegerField(
            min_value=0, max_value=metadata_log.MAX_WAIT_MS, required=False, default=0
        )

    def get(self, request):
        q = validate_input(self.FilterSerializer, request.query_params)
        answer = metadata_log.read_since(q["since"], wait_ms=q["wait_ms"])
        return Response(
            {
                "cluster_id": settings.SLUICE_CLUSTER_ID,
                "version": answer.version,
                "log_start_version": answer.log_start_version,
                "reset": answer.reset,
                "records": answer.records,
            }
        )
