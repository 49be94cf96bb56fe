"""Consumer groups API (docs/consumer-groups.md, /tmp console contract): thin views over
``selectors`` and ``services``; the data comes from the group's coordinator broker."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.core.schema import errors
from backend.core.serializers import StrictCharField, StrictSerializer, validate_input
from backend.groups import selectors, services
from backend.tenancy.permissions import TenantAPIView

TAGS = ["groups"]
HEALTH = ["OK", "WARN", "ERR", "STALL", "STOP", "EMPTY"]
GROUP_TYPES = ["consumer", "classic"]
# consumer (KIP-848) groups: EMPTY, ASSIGNING, RECONCILING, STABLE; classic groups: EMPTY,
# PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD (Kafka's states, upper snake case)
GROUP_STATES = [
    "EMPTY",
    "ASSIGNING",
    "RECONCILING",
    "PREPARING_REBALANCE",
    "COMPLETING_REBALANCE",
    "STABLE",
    "DEAD",
]
TYPE_HELP = (
    "consumer: Kafka's consumer protocol (KIP-848: REST, WebSocket, the SDK, Kafka clients "
    "with group.protocol=consumer); classic: Kafka's classic protocol (JoinGroup/SyncGroup), "
    "and a group that only has committed offsets"
)
STATE_HELP = (
    "consumer groups: EMPTY, ASSIGNING, RECONCILING or STABLE; classic groups: EMPTY, "
    "PREPARING_REBALANCE (members rejoin), COMPLETING_REBALANCE (waiting for the leader's "
    "assignment), STABLE or DEAD (being removed)"
)
STRATEGIES = ["earliest", "latest", "offset", "datetime", "shift-by", "by-duration"]
GROUP_PARAM = OpenApiParameter("group_id", str, OpenApiParameter.PATH)
RESET_PARAM = OpenApiParameter("reset_id", str, OpenApiParameter.PATH)


class GroupSummarySerializer(serializers.Serializer):
    group_id = serializers.CharField()
    type = serializers.ChoiceField(choices=GROUP_TYPES, help_text=TYPE_HELP)
    state = serializers.ChoiceField(choices=GROUP_STATES, help_text=STATE_HELP)
    members = serializers.IntegerField()
    total_lag = serializers.IntegerField()
    health = serializers.ChoiceField(choices=HEALTH)


class GroupListOutputSerializer(serializers.Serializer):
    results = GroupSummarySerializer(many=True)


class TopicPartitionSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()


class MemberSerializer(serializers.Serializer):
    member_id = serializers.CharField()
    client_id = serializers.CharField(allow_null=True)
    client_host = serializers.CharField(
        allow_null=True, help_text="the IP address the member connects from; null: unknown"
    )
    instance_id = serializers.CharField(
        allow_null=True, help_text="group.instance.id of a static member, else null"
    )
    assignments = TopicPartitionSerializer(many=True)


class PartitionLagSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    committed_offset = serializers.IntegerField(allow_null=True)
    log_end_offset = serializers.IntegerField(allow_null=True)
    lag = serializers.IntegerField(allow_null=True)
    time_lag_ms = serializers.IntegerField(allow_null=True)


class GroupDetailOutputSerializer(serializers.Serializer):
    group_id = serializers.CharField()
    type = serializers.ChoiceField(choices=GROUP_TYPES, help_text=TYPE_HELP)
    state = serializers.ChoiceField(choices=GROUP_STATES, help_text=STATE_HELP)
    coordinator = serializers.IntegerField(help_text="the coordinator's broker id")
    members = MemberSerializer(many=True)
    offsets = PartitionLagSerializer(many=True)


class ResetInputSerializer(StrictSerializer):
    topic = StrictCharField(max_length=249)
    partitions = serializers.ListField(
        child=serializers.IntegerField(min_value=0), allow_null=True, required=False
    )
    strategy = serializers.ChoiceField(choices=STRATEGIES)
    value = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="offset (offset), shift (shift-by), RFC 3339 or epoch ms (datetime), "
        "ISO 8601 duration or ms (by-duration)",
    )
    dry_run = serializers.BooleanField(required=False, default=True)


class PlanRowSerializer(serializers.Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    current = serializers.IntegerField(allow_null=True)
    target = serializers.IntegerField(allow_null=True)
    delta = serializers.IntegerField(allow_null=True)


class ResetOutputSerializer(serializers.Serializer):
    plan = PlanRowSerializer(many=True)
    applied = serializers.BooleanField()
    reset_id = serializers.CharField(allow_null=True)


class GroupListApi(TenantAPIView):
    @extend_schema(
        operation_id="groups_list",
        tags=TAGS,
        responses={200: GroupListOutputSerializer, **errors(503)},
    )
    def get(self, request):
        return Response({"results": selectors.group_list(organisation=self.organisation)})


class GroupDetailApi(TenantAPIView):
    @extend_schema(
        operation_id="groups_retrieve",
        tags=TAGS,
        parameters=[GROUP_PARAM],
        responses={200: GroupDetailOutputSerializer, **errors(404, 503)},
    )
    def get(self, request, group_id: str):
        return Response(selectors.group_detail(organisation=self.organisation, group_id=group_id))

    @extend_schema(
        operation_id="groups_destroy",
        tags=TAGS,
        parameters=[GROUP_PARAM],
        responses={204: None, **errors(404, 409, 503)},
    )
    def delete(self, request, group_id: str):
        services.group_delete(ctx=self.ctx, group_id=group_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupResetOffsetsApi(TenantAPIView):
    @extend_schema(
        operation_id="groups_reset_offsets",
        tags=TAGS,
        parameters=[GROUP_PARAM],
        request=ResetInputSerializer,
        description="Plan (dry_run, the default) or apply an offset reset of an inactive "
        "group; 409 GROUP_NOT_EMPTY while it has members. Applied resets can be undone.",
        responses={200: ResetOutputSerializer, **errors(400, 404, 409, 503)},
    )
    def post(self, request, group_id: str):
        data = validate_input(ResetInputSerializer, request.data)
        return Response(
            services.offsets_reset(
                ctx=self.ctx,
                group_id=group_id,
                topic=data["topic"],
                partitions=data.get("partitions"),
                strategy=data["strategy"],
                value=data.get("value"),
                dry_run=data["dry_run"],
            )
        )


class GroupResetUndoApi(TenantAPIView):
    @extend_schema(
        operation_id="groups_reset_offsets_undo",
        tags=TAGS,
        parameters=[GROUP_PARAM, RESET_PARAM],
        request=None,
        description="Put back the offsets an applied reset replaced.",
        responses={200: ResetOutputSerializer, **errors(404, 409, 503)},
    )
    def post(self, request, group_id: str, reset_id):
        return Response(
            services.offsets_reset_undo(ctx=self.ctx, group_id=group_id, reset_id=reset_id)
        )
