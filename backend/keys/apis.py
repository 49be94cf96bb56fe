"""API keys (admins): list, create (the secret is in this one response only), revoke."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.keys import selectors, services
from backend.tenancy.permissions import AdminAPIView
from backend.tenancy.selectors import service_account_get

TAGS = ["api keys"]


class ApiKeyOutputSerializer(serializers.Serializer):
    key_id = serializers.CharField()
    prefix = serializers.SerializerMethodField(help_text="slk_<key_id>: safe to show")
    service_account_id = serializers.UUIDField()
    service_account = serializers.CharField(source="service_account.name")
    description = serializers.CharField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    last_used_at = serializers.DateTimeField(
        allow_null=True,
        help_text="its last use on the API or any broker, to about a minute (brokers report "
        "the keys used with their heartbeats)",
    )
    revoked_at = serializers.DateTimeField(allow_null=True)

    def get_prefix(self, obj) -> str:
        return f"slk_{obj.key_id}"


class ApiKeyCreatedOutputSerializer(ApiKeyOutputSerializer):
    key = serializers.CharField(
        help_text="slk_<key_id>.<secret>: shown this once; store it now, Sluice cannot show it "
        "again"
    )


KEY_PARAM = OpenApiParameter("key_id", str, OpenApiParameter.PATH)


class ApiKeyListApi(AdminAPIView):
    class FilterSerializer(StrictSerializer):
        service_account_id = serializers.UUIDField(required=False)
        include_revoked = serializers.BooleanField(required=False, default=True)

    class InputSerializer(StrictSerializer):
        service_account_id = serializers.UUIDField()
        description = serializers.CharField(max_length=500, required=False, allow_blank=True)

    @extend_schema(
        operation_id="api_keys_list",
        tags=TAGS,
        parameters=[FilterSerializer],
        responses={200: ApiKeyOutputSerializer(many=True), **errors(400, 404)},
    )
    def get(self, request):
        filters = validate_input(self.FilterSerializer, request.query_params)
        sa = None
        if "service_account_id" in filters:
            sa = service_account_get(
                organisation=self.organisation, service_account_id=filters["service_account_id"]
            )
        keys = selectors.api_key_list(
            organisation=self.organisation,
            service_account=sa,
            include_revoked=filters["include_revoked"],
        )
        return Response(ApiKeyOutputSerializer(keys, many=True).data)

    @extend_schema(
        operation_id="api_keys_create",
        tags=TAGS,
        request=InputSerializer,
        responses={201: ApiKeyCreatedOutputSerializer, **errors(400, 404)},
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        sa = service_account_get(
            organisation=self.organisation, service_account_id=data["service_account_id"]
        )
        created = services.api_key_create(
            ctx=self.ctx, service_account=sa, description=data.get("description", "")
        )
        body = ApiKeyOutputSerializer(created.api_key).data
        body["key"] = created.token
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class ApiKeyDetailApi(AdminAPIView):
    @extend_schema(
        operation_id="api_keys_retrieve",
        tags=TAGS,
        parameters=[KEY_PARAM],
        responses={200: ApiKeyOutputSerializer, **errors(404)},
    )
    def get(self, request, key_id: str):
        key = selectors.api_key_get(organisation=self.organisation, key_id=key_id)
        return Response(ApiKeyOutputSerializer(key).data)

    @extend_schema(
        operation_id="api_keys_revoke",
        tags=TAGS,
        parameters=[KEY_PARAM],
        description="Revoke: refused from the next request on.",
        responses={204: None, **errors(404)},
    )
    def delete(self, request, key_id: str):
        key = selectors.api_key_get(organisation=self.organisation, key_id=key_id)
        services.api_key_revoke(ctx=self.ctx, api_key=key)
        return Response(status=status.HTTP_204_NO_CONTENT)
