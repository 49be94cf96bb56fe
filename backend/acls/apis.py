"""ACL bindings (admins): list with filters, create, retrieve, delete."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.acls import selectors, services
from backend.acls.models import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.tenancy.permissions import AdminAPIView

TAGS = ["acls"]


class AclOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    principal = serializers.CharField()
    host = serializers.CharField()
    resource_type = serializers.ChoiceField(choices=RESOURCE_TYPES)
    resource_name = serializers.CharField()
    pattern_type = serializers.ChoiceField(choices=PATTERN_TYPES)
    operation = serializers.ChoiceField(choices=OPERATIONS)
    permission = serializers.ChoiceField(choices=PERMISSIONS)
    created_at = serializers.DateTimeField()


ACL_PARAM = OpenApiParameter("acl_id", str, OpenApiParameter.PATH)


class AclListApi(AdminAPIView):
    class FilterSerializer(StrictSerializer):
        principal = serializers.CharField(required=False, max_length=200)
        resource_type = serializers.ChoiceField(choices=RESOURCE_TYPES, required=False)
        resource_name = serializers.CharField(required=False, max_length=255)
        pattern_type = serializers.ChoiceField(choices=PATTERN_TYPES, required=False)

    class InputSerializer(StrictSerializer):
        # Plain strings: brokernodes.security.acl validates them and names the bad fields.
        principal = serializers.CharField(max_length=200, help_text="e.g. User:my-service")
        host = serializers.CharField(max_length=64, required=False, default="*")
        resource_type = serializers.CharField(
            max_length=16, help_text="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID"
        )
        resource_name = serializers.CharField(max_length=255)
        pattern_type = serializers.CharField(
            max_length=16, required=False, default="LITERAL", help_text="LITERAL or PREFIXED"
        )
        operation = serializers.CharField(max_length=32, help_text="READ, WRITE, ... or ALL")
        permission = serializers.CharField(
            max_length=8, required=False, default="ALLOW", help_text="ALLOW or DENY"
        )

    @extend_schema(
        operation_id="acls_list",
        tags=TAGS,
        parameters=[FilterSerializer],
        responses={200: AclOutputSerializer(many=True), **errors(400)},
    )
    def get(self, request):
        filters = validate_input(self.FilterSerializer, request.query_params)
        bindings = selectors.acl_list(organisation=self.organisation, **filters)
        return Response(AclOutputSerializer(bindings, many=True).data)

    @extend_schema(
        operation_id="acls_create",
        tags=TAGS,
        request=InputSerializer,
        responses={201: AclOutputSerializer, **errors(400, 409)},
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        binding = services.acl_create(ctx=self.ctx, **data)
        return Response(AclOutputSerializer(binding).data, status=status.HTTP_201_CREATED)


class AclDetailApi(AdminAPIView):
    @extend_schema(
        operation_id="acls_retrieve",
        tags=TAGS,
        parameters=[ACL_PARAM],
        responses={200: AclOutputSerializer, **errors(404)},
    )
    def get(self, request, acl_id):
        binding = selectors.acl_get(organisation=self.organisation, acl_id=acl_id)
        return Response(AclOutputSerializer(binding).data)

    @extend_schema(
        operation_id="acls_delete",
        tags=TAGS,
        parameters=[ACL_PARAM],
        responses={204: None, **errors(404)},
    )
    def delete(self, request, acl_id):
        binding = selectors.acl_get(organisation=self.organisation, acl_id=acl_id)
        services.acl_delete(ctx=self.ctx, binding=binding)
        return Response(status=status.HTTP_204_NO_CONTENT)
