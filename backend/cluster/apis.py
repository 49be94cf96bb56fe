"""Internal routes for brokers (``/internal/v1/``), authenticated by the cluster secret.

Not part of the public API: excluded from the OpenAPI schema."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.asgi_aborts import ABORTED_SCOPE_KEY
from backend.cluster import lease, metadata_log, partition_services, selectors, services
from backend.cluster.authentication import ClusterSecretAuthentication, IsBroker
from backend.core.exceptions import NotFound
from backend.core.serializers import StrictSerializer, validate_input
from backend.keys.services import api_keys_used


def validate_host_port(value: str | None) -> None:
    """A Kafka advertised address: ``host:port`` (an IPv6 host in brackets), port 1-65535."""
    if value is None:
        return
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise serializers.ValidationError("must be 'host:port' with a port from 1 to 65535")
    if any(c.isspace() for c in value) or "/" in value:
        raise serializers.ValidationError("must be 'host:port' (no scheme, path or spaces)")


class InternalAPIView(APIView):
    authentication_classes = [ClusterSecretAuthentication]
    permission_classes = [IsBroker]
    throttle_classes: list = []


@extend_schema(exclude=True)
class BrokerRegisterApi(InternalAPIView):
    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        url = serializers.URLField(max_length=500)
        clean_shutdown = serializers.BooleanField(required=False, default=True)
        kafka = serializers.CharField(
            required=False,
            allow_null=True,
            default=None,
            max_length=300,
            validators=[validate_host_port],
            help_text="the broker's Kafka listener as clients reach it, 'host:port'",
        )

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        broker = services.broker_register(
            broker_id=data["broker_id"],
            url=data["url"],
            clean_shutdown=data["clean_shutdown"],
            kafka=data["kafka"],
        )
        version, _ = metadata_log.head()
        return Response(
            {
                "cluster_id": settings.SLUICE_CLUSTER_ID,
                "broker_id": broker.broker_id,
                "broker_epoch": broker.epoch,
                "version": version,
                "heartbeat_interval_ms": int(settings.SLUICE_BROKER_HEARTBEAT_INTERVAL_S * 1000),
            }
        )


@extend_schema(exclude=True)
class BrokerHeartbeatApi(InternalAPIView):
    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        metadata_version = serializers.IntegerField(min_value=0, required=False, default=0)
        broker_epoch = serializers.IntegerField(required=False, allow_null=True, default=None)
        replica_logs = serializers.ListField(
            child=serializers.DictField(), required=False, default=list, max_length=100_000
        )
        keys_used = serializers.ListField(
            child=serializers.CharField(max_length=64),
            required=False,
            default=list,
            max_length=100_000,
            help_text="API key ids used on the broker since it last sent them (last used)",
        )

    class ReplicaLogSerializer(StrictSerializer):
        """The broker's log of a partition it sees offline (for unclean recovery)."""

        topic_id = serializers.UUIDField()
        partition = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        last_leader_epoch = serializers.IntegerField(min_value=-1, max_value=2**31 - 1)
        log_end_offset = serializers.IntegerField(min_value=0, max_value=2**63 - 1)

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        logs = [validate_input(self.ReplicaLogSerializer, r) for r in data["replica_logs"]]
        broker = selectors.broker_get(broker_id=data["broker_id"])
        if broker is None:
            raise NotFound("unknown broker: register first")
        broker = services.broker_heartbeat(
            broker=broker,
            metadata_version=data["metadata_version"],
            broker_epoch=data["broker_epoch"],
            replica_logs=logs,
        )
        api_keys_used(key_ids=data["keys_used"])
        return Response(
            {
                "broker_id": broker.broker_id,
                "live": True,
                "fenced": broker.fenced,
                "shutting_down": broker.shutting_down,
            }
        )


@extend_schema(exclude=True)
class MetadataApi(InternalAPIView):
    class FilterSerializer(StrictSerializer):
        since = serializers.IntegerField(min_value=0, required=False, default=0)
        wait_ms = serializers.IntegerField(
            min_value=0, max_value=metadata_log.MAX_WAIT_MS, required=False, default=0
        )

    def get(self, request):
        q = validate_input(self.FilterSerializer, request.query_params)
        answer = metadata_log.read_since(
            q["since"],
            wait_ms=q["wait_ms"],
            aborted=getattr(request, "scope", {}).get(ABORTED_SCOPE_KEY),  # ASGI only
        )
        return Response(
            {
                "cluster_id": settings.SLUICE_CLUSTER_ID,
                "version": answer.version,
                "log_start_version": answer.log_start_version,
                "reset": answer.reset,
                "records": answer.records,
            }
        )


BROKER_ID = {"min_value": 0, "max_value": 2**31 - 1}


@extend_schema(exclude=True)
class AlterPartitionApi(InternalAPIView):
    """A leader's ISR change (docs/controller.md): 200 with Kafka's error code either way and
    the partition's current registration; 404 for an unknown partition; 409
    STALE_BROKER_EPOCH when the leader's registration is not its current one."""

    class MemberSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(**BROKER_ID)
        broker_epoch = serializers.IntegerField(min_value=-1)

    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(**BROKER_ID)
        broker_epoch = serializers.IntegerField(min_value=-1)
        topic_id = serializers.UUIDField()
        partition = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        leader_epoch = serializers.IntegerField(min_value=-1)
        partition_epoch = serializers.IntegerField(min_value=-1)
        new_isr = serializers.ListField(child=serializers.DictField(), max_length=1000)
        below_high_watermark = serializers.ListField(
            child=serializers.IntegerField(**BROKER_ID), max_length=1000, required=False
        )

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        members = [validate_input(self.MemberSerializer, m) for m in data["new_isr"]]
        outcome = partition_services.alter_partition(
            broker_id=data["broker_id"],
            broker_epoch=data["broker_epoch"],
            topic_id=data["topic_id"],
            partition=data["partition"],
            leader_epoch=data["leader_epoch"],
            partition_epoch=data["partition_epoch"],
            new_isr=[(m["broker_id"], m["broker_epoch"]) for m in members],
            below_high_watermark=data.get("below_high_watermark", []),
        )
        reg = outcome.registration
        return Response(
            {
                "error_code": outcome.error_code,
                "topic_id": str(data["topic_id"]),
                "partition": data["partition"],
                "leader": reg.leader,
                "leader_epoch": reg.leader_epoch,
                "partition_epoch": reg.partition_epoch,
                "isr": list(reg.isr),
                "elr": list(reg.elr),
                "replicas": list(reg.replicas),
            }
        )


@extend_schema(exclude=True)
class ControlledShutdownApi(InternalAPIView):
    """Controlled shutdown: the broker repeats this until ``partitions_led`` is 0."""

    class InputSerializer(StrictSerializer):
        broker_id = serializers.IntegerField(**BROKER_ID)
        broker_epoch = serializers.IntegerField(min_value=-1)

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        led = partition_services.broker_controlled_shutdown(**data)
        return Response({"broker_id": data["broker_id"], "partitions_led": led})


# --- operators --------------------------------------------------------------------------


@extend_schema(exclude=True)
class ControllerStatusApi(InternalAPIView):
    """The active controller (id, epoch) and the brokers as the controller sees them."""

    def get(self, request):
        active = lease.current()
        return Response(
            {
                "controller": {
                    **active,
                    "expires_at": active["expires_at"].isoformat()
                    if active["expires_at"]
                    else None,
                },
                "brokers": selectors.broker_states(),
            }
        )


@extend_schema(exclude=True)
class PartitionStatesApi(InternalAPIView):
    """Every partition's state, or only the under-replicated or offline ones."""

    class FilterSerializer(StrictSerializer):
        state = serializers.ChoiceField(
            choices=["all", "under_replicated", "offline"], required=False, default="all"
        )

    def get(self, request):
        q = validate_input(self.FilterSerializer, request.query_params)
        return Response({"partitions": selectors.partition_states(state=q["state"])})


@extend_schema(exclude=True)
class PreferredElectionApi(InternalAPIView):
    """Operator trigger: give partitions (all, one topic's, or one) to preferred leaders."""

    class InputSerializer(StrictSerializer):
        topic_id = serializers.UUIDField(required=False, allow_null=True, default=None)
        partition = serializers.IntegerField(
            min_value=0, required=False, allow_null=True, default=None
        )

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        moved = partition_services.preferred_leader_election(**data)
        return Response({"elected": moved})


@extend_schema(exclude=True)
class ReassignmentApi(InternalAPIView):
    """POST starts moving a partition to ``replicas``; DELETE cancels an unfinished move."""

    class InputSerializer(StrictSerializer):
        topic_id = serializers.UUIDField()
        partition = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        replicas = serializers.ListField(
            child=serializers.IntegerField(**BROKER_ID), min_length=1, max_length=16
        )

    class CancelSerializer(StrictSerializer):
        topic_id = serializers.UUIDField()
        partition = serializers.IntegerField(min_value=0, max_value=2**31 - 1)

    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        a = partition_services.reassignment_start(**data)
        return Response(selectors.partition_state(a))

    def delete(self, request):
        data = validate_input(self.CancelSerializer, request.data or request.query_params)
        a, cancelled = partition_services.reassignment_cancel(**data)
        return Response({**selectors.partition_state(a), "cancelled": cancelled})
