"""The cluster as a tenant sees it: its own partitions' health (``/api/v1/cluster/``).

Tenant-scoped like every public route: only the caller's organisation's topics. Broker ids
are cluster-wide facts clients see anyway (Kafka's metadata), so they are shown."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from backend.cluster import selectors
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy.permissions import TenantAPIView


class PartitionStateOutputSerializer(serializers.Serializer):
    partition = serializers.IntegerField()
    leader = serializers.IntegerField(help_text="broker id of the leader; -1: offline")
    leader_epoch = serializers.IntegerField()
    replicas = serializers.ListField(
        child=serializers.IntegerField(), help_text="broker ids; the first is the preferred"
    )
    isr = serializers.ListField(child=serializers.IntegerField(), help_text="in-sync replicas")
    elr = serializers.ListField(
        child=serializers.IntegerField(), help_text="eligible leader replicas (KIP-966)"
    )
    adding_replicas = serializers.ListField(child=serializers.IntegerField())
    removing_replicas = serializers.ListField(child=serializers.IntegerField())
    under_replicated = serializers.BooleanField(help_text="online, but a replica is out of sync")
    offline = serializers.BooleanField(help_text="no leader: not readable or writable")


class TopicPartitionStateOutputSerializer(PartitionStateOutputSerializer):
    topic = serializers.CharField()


class ClusterPartitionsOutputSerializer(serializers.Serializer):
    partitions = TopicPartitionStateOutputSerializer(many=True)


class ClusterPartitionsApi(TenantAPIView):
    class FilterSerializer(StrictSerializer):
        state = serializers.ChoiceField(
            choices=["all", "under_replicated", "offline"],
            required=False,
            default="all",
            help_text="all partitions, or only under-replicated or offline ones",
        )

    @extend_schema(
        operation_id="cluster_partitions",
        tags=["cluster"],
        parameters=[FilterSerializer],
        responses={200: ClusterPartitionsOutputSerializer, **errors(400)},
    )
    def get(self, request):
        q = validate_input(self.FilterSerializer, request.query_params)
        states = selectors.partition_states(state=q["state"], organisation=self.organisation)
        for s in states:
            s.pop("topic_id", None)
            s.pop("partition_epoch", None)
        return Response(ClusterPartitionsOutputSerializer({"partitions": states}).data)
