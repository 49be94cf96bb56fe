"""Quotas: admins read the organisation's and manage service accounts' (within the
organisation's); platform staff set organisation quotas under /api/v1/platform/."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.core.exceptions import NotFound
from backend.core.schema import errors
from backend.core.serializers import StrictSerializer, validate_input
from backend.quotas import selectors, services
from backend.quotas.models import QUOTA_FIELDS
from backend.tenancy.permissions import AdminAPIView, PlatformAPIView
from backend.tenancy.selectors import organisation_lookup, service_account_get

TAGS = ["quotas"]


def _limit(**kw) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, allow_null=True, **kw)


class QuotaUsageSerializer(serializers.Serializer):
    topics = serializers.IntegerField()
    partitions = serializers.IntegerField()
    storage_bytes = serializers.IntegerField(
        allow_null=True,
        help_text="bytes the partition leaders hold; null: no broker could be asked",
    )
    storage_partial = serializers.BooleanField(
        help_text="some live broker did not answer: storage_bytes counts the others only"
    )


class QuotaOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    scope = serializers.ChoiceField(choices=["organisation", "service_account"])
    service_account_id = serializers.UUIDField(allow_null=True)
    produce_bytes_per_sec = _limit()
    fetch_bytes_per_sec = _limit()
    request_rate = _limit(help_text="requests per second")
    storage_bytes = _limit()
    max_topics = _limit()
    max_partitions = _limit()
    max_connections = _limit()
    max_consumer_instances = _limit(
        help_text="REST consumer instances per broker (null: the broker's per-tenant default)"
    )
    max_streams = _limit(
        help_text="WebSocket streams per broker (null: the broker's per-tenant default)"
    )
    updated_at = serializers.DateTimeField()
    usage = QuotaUsageSerializer(
        allow_null=True,
        required=False,
        help_text="the organisation's current use (on its own quota in the list); null on a "
        "service account's (not measured per account)",
    )


class QuotaValuesSerializer(StrictSerializer):
    """Limits to set; null means unlimited (or, for an account, the organisation's)."""

    produce_bytes_per_sec = _limit(required=False, max_value=2**62)
    fetch_bytes_per_sec = _limit(required=False, max_value=2**62)
    request_rate = _limit(required=False, max_value=2**31 - 1)
    storage_bytes = _limit(required=False, max_value=2**62)
    max_topics = _limit(required=False, max_value=2**31 - 1)
    max_partitions = _limit(required=False, max_value=2**31 - 1)
    max_connections = _limit(required=False, max_value=2**31 - 1)
    max_consumer_instances = _limit(required=False, max_value=2**31 - 1)
    max_streams = _limit(required=False, max_value=2**31 - 1)


class ServiceAccountQuotaInputSerializer(QuotaValuesSerializer):
    service_account_id = serializers.UUIDField()


def _values(data: dict) -> dict:
    return {k: v for k, v in data.items() if k in QUOTA_FIELDS}


QUOTA_PARAM = OpenApiParameter("quota_id", str, OpenApiParameter.PATH)


class QuotaListApi(AdminAPIView):
    @extend_schema(
        operation_id="quotas_list",
        tags=TAGS,
        responses={200: QuotaOutputSerializer(many=True), **errors()},
    )
    def get(self, request):
        quotas = list(selectors.quota_list(organisation=self.organisation))
        usage = selectors.organisation_usage(organisation=self.organisation)
        rows = QuotaOutputSerializer(quotas, many=True).data
        for row, quota in zip(rows, quotas, strict=True):
            row["usage"] = usage if quota.service_account_id is None else None
        return Response(rows)

    @extend_schema(
        operation_id="quotas_create",
        tags=TAGS,
        request=ServiceAccountQuotaInputSerializer,
        description="A service account's quota, at most the organisation's.",
        responses={201: QuotaOutputSerializer, **errors(400, 404, 409)},
    )
    def post(self, request):
        data = validate_input(ServiceAccountQuotaInputSerializer, request.data)
        sa = service_account_get(
            organisation=self.organisation, service_account_id=data["service_account_id"]
        )
        quota = services.quota_create_for_service_account(
            ctx=self.ctx, service_account=sa, values=_values(data)
        )
        return Response(QuotaOutputSerializer(quota).data, status=status.HTTP_201_CREATED)


class QuotaDetailApi(AdminAPIView):
    @extend_schema(
        operation_id="quotas_retrieve",
        tags=TAGS,
        parameters=[QUOTA_PARAM],
        responses={200: QuotaOutputSerializer, **errors(404)},
    )
    def get(self, request, quota_id):
        quota = selectors.quota_get(organisation=self.organisation, quota_id=quota_id)
        return Response(QuotaOutputSerializer(quota).data)

    @extend_schema(
        operation_id="quotas_update",
        tags=TAGS,
        parameters=[QUOTA_PARAM],
        request=QuotaValuesSerializer,
        description="Change a service account's quota (the organisation's: staff).",
        responses={200: QuotaOutputSerializer, **errors(400, 404)},
    )
    def patch(self, request, quota_id):
        quota = selectors.quota_get(organisation=self.organisation, quota_id=quota_id)
        data = validate_input(QuotaValuesSerializer, request.data)
        quota = services.quota_update(ctx=self.ctx, quota=quota, values=_values(data))
        return Response(QuotaOutputSerializer(quota).data)

    @extend_schema(
        operation_id="quotas_delete",
        tags=TAGS,
        parameters=[QUOTA_PARAM],
        responses={204: None, **errors(404)},
    )
    def delete(self, request, quota_id):
        quota = selectors.quota_get(organisation=self.organisation, quota_id=quota_id)
        services.quota_delete(ctx=self.ctx, quota=quota)
        return Response(status=status.HTTP_204_NO_CONTENT)


ORG_PARAM = OpenApiParameter("organisation", str, OpenApiParameter.PATH, description="id or slug")


class PlatformOrganisationQuotaApi(PlatformAPIView):
    def _organisation(self, organisation: str):
        org = organisation_lookup(organisation)
        if org is None:
            raise NotFound("no such organisation")
        return org

    @extend_schema(
        operation_id="platform_organisation_quota_retrieve",
        tags=["platform"],
        parameters=[ORG_PARAM],
        responses={200: QuotaOutputSerializer, **errors(404)},
    )
    def get(self, request, organisation: str):
        org = self._organisation(organisation)
        quota = selectors.quota_for_organisation(organisation=org)
        if quota is None:
            raise NotFound("this organisation has no quota row")
        return Response(QuotaOutputSerializer(quota).data)

    @extend_schema(
        operation_id="platform_organisation_quota_update",
        tags=["platform"],
        parameters=[ORG_PARAM],
        request=QuotaValuesSerializer,
        description="Platform staff only: set an organisation's limits.",
        responses={200: QuotaOutputSerializer, **errors(400, 404)},
    )
    def patch(self, request, organisation: str):
        org = self._organisation(organisation)
        data = validate_input(QuotaValuesSerializer, request.data)
        quota = services.quota_set_organisation(
            ctx=self.context(org), organisation=org, values=_values(data)
        )
        return Response(QuotaOutputSerializer(quota).data)
