"""The audit log, for the organisation's admins: newest first, limit/offset paginated."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from backend.audit import selectors
from backend.audit.describe import changes, object_name
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy.permissions import AdminAPIView


class ChangeSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="dotted path, e.g. configs.retention.ms")
    before = serializers.JSONField(allow_null=True, help_text="null: absent before")
    after = serializers.JSONField(allow_null=True, help_text="null: absent after")


class AuditEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    actor = serializers.CharField(help_text="user:<name>, service-account:<name> or system")
    api_key_id = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    ip = serializers.IPAddressField(allow_null=True)
    user_agent = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    object_name = serializers.CharField(
        allow_null=True, help_text="the topic's, group's, account's... name; null: not known"
    )
    changes = ChangeSerializer(many=True, help_text="what differs between before and after")


class AuditPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = AuditEventOutputSerializer(many=True)


class AuditEventListApi(AdminAPIView):
    class FilterSerializer(StrictSerializer):
        action = serializers.CharField(required=False, max_length=64)
        object_type = serializers.CharField(required=False, max_length=64)
        object_id = serializers.CharField(required=False, max_length=255)
        since = serializers.DateTimeField(required=False)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)
        offset = serializers.IntegerField(required=False, min_value=0, default=0)

    @extend_schema(
        operation_id="audit_list",
        tags=["audit"],
        parameters=[FilterSerializer],
        responses={200: AuditPageSerializer, **errors(400)},
    )
    def get(self, request):
        filters = validate_input(self.FilterSerializer, request.query_params)
        limit, offset = filters.pop("limit"), filters.pop("offset")
        events = selectors.audit_event_list(organisation=self.organisation, **filters)
        page = events[offset : offset + limit]
        return Response(
            {
                "count": events.count(),
                "results": AuditEventOutputSerializer(
                    [_described(e) for e in page], many=True
                ).data,
            }
        )


def _described(event) -> dict:
    """The event's fields with its object's name and what changed."""
    computed = ("object_name", "changes")
    data = {f: getattr(event, f) for f in AuditEventOutputSerializer().fields if f not in computed}
    data["object_name"] = object_name(event.object_type, event.object_id, event.before, event.after)
    data["changes"] = changes(event.before, event.after)
    return data
