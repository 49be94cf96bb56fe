"""Topics API: thin views over ``services`` and ``selectors``."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from backend.cluster.tenant_apis import PartitionStateOutputSerializer
from backend.core.schema import errors
from backend.core.serializers import StrictCharField, StrictSerializer, validate_input
from backend.tenancy.permissions import TenantAPIView
from backend.topics import selectors, services
from backend.topics.config_registry import KINDS, config_definitions
from backend.topics.configs import effective_configs

TAGS = ["topics"]
VALIDATE_ONLY_HELP = "check everything (quotas and name clashes too) and change nothing"


class TopicOutputSerializer(serializers.Serializer):
    topic_id = serializers.UUIDField(
        allow_null=True, help_text="new on every creation; null in a validate_only answer"
    )
    name = serializers.CharField()
    partitions = serializers.IntegerField()
    replication_factor = serializers.IntegerField()
    configs = serializers.DictField(
        child=serializers.CharField(), help_text="the overrides, by Kafka config name"
    )
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    validate_only = serializers.BooleanField(help_text="true when nothing was changed")


class TopicDetailOutputSerializer(TopicOutputSerializer):
    effective_configs = serializers.DictField(
        child=serializers.CharField(), help_text="every config with its effective value"
    )
    partition_details = PartitionStateOutputSerializer(
        many=True, help_text="per partition: leader, replicas, ISR and health"
    )


def topic_data(topic, *, validate_only: bool = False, detail: bool = False) -> dict:
    data = {
        "topic_id": topic.topic_id if topic.pk else None,
        "name": topic.name,
        "partitions": topic.partitions,
        "replication_factor": topic.replication_factor,
        "configs": dict(topic.configs),
        "created_at": topic.created_at if topic.pk else None,
        "updated_at": topic.updated_at if topic.pk else None,
        "validate_only": validate_only,
    }
    if detail:
        data["effective_configs"] = effective_configs(topic.configs)
        data["partition_details"] = selectors.topic_partition_states(topic) if topic.pk else []
        return TopicDetailOutputSerializer(data).data
    return TopicOutputSerializer(data).data


NAME_PARAM = OpenApiParameter("name", str, OpenApiParameter.PATH, description="topic name")


class TopicListApi(TenantAPIView):
    class FilterSerializer(StrictSerializer):
        prefix = serializers.CharField(required=False, max_length=249)

    class InputSerializer(StrictSerializer):
        name = StrictCharField(
            max_length=1000,
            trim_whitespace=False,
            help_text="Kafka's rules: 1-249 of [a-zA-Z0-9._-]",
        )
        partitions = serializers.IntegerField(
            required=False, min_value=-(2**31), max_value=2**31 - 1
        )
        replication_factor = serializers.IntegerField(
            required=False, min_value=-(2**15), max_value=2**15 - 1
        )
        configs = serializers.DictField(
            child=serializers.JSONField(), required=False, help_text="Kafka config names"
        )
        validate_only = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        operation_id="topics_list",
        tags=TAGS,
        parameters=[FilterSerializer],
        responses={200: TopicOutputSerializer(many=True), **errors(400)},
    )
    def get(self, request):
        filters = validate_input(self.FilterSerializer, request.query_params)
        topics = selectors.topic_list(organisation=self.organisation, **filters)
        return Response([topic_data(t) for t in topics])

    @extend_schema(
        operation_id="topics_create",
        tags=TAGS,
        description="Create a topic. With validate_only, " + VALIDATE_ONLY_HELP + " (200).",
        request=InputSerializer,
        responses={
            201: TopicDetailOutputSerializer,
            200: TopicDetailOutputSerializer,
            **errors(400, 409),
        },
    )
    def post(self, request):
        data = validate_input(self.InputSerializer, request.data)
        topic = services.topic_create(ctx=self.ctx, **data)
        code = status.HTTP_200_OK if data["validate_only"] else status.HTTP_201_CREATED
        return Response(
            topic_data(topic, validate_only=data["validate_only"], detail=True), status=code
        )


class TopicDetailApi(TenantAPIView):
    class InputSerializer(StrictSerializer):
        configs = serializers.DictField(
            child=serializers.JSONField(allow_null=True),
            help_text="configs to set; null removes an override (back to the default)",
        )
        validate_only = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        operation_id="topics_retrieve",
        tags=TAGS,
        parameters=[NAME_PARAM],
        responses={200: TopicDetailOutputSerializer, **errors(404)},
    )
    def get(self, request, name: str):
        topic = selectors.topic_get(organisation=self.organisation, name=name)
        return Response(topic_data(topic, detail=True))

    @extend_schema(
        operation_id="topics_alter_configs",
        tags=TAGS,
        parameters=[NAME_PARAM],
        request=InputSerializer,
        responses={200: TopicDetailOutputSerializer, **errors(400, 404)},
    )
    def patch(self, request, name: str):
        topic = selectors.topic_get(organisation=self.organisation, name=name)
        data = validate_input(self.InputSerializer, request.data)
        topic = services.topic_alter_configs(
            ctx=self.ctx,
            topic=topic,
            changes=data["configs"],
            validate_only=data["validate_only"],
        )
        return Response(topic_data(topic, validate_only=data["validate_only"], detail=True))

    @extend_schema(
        operation_id="topics_delete",
        tags=TAGS,
        parameters=[NAME_PARAM],
        responses={204: None, **errors(404)},
    )
    def delete(self, request, name: str):
        topic = selectors.topic_get(organisation=self.organisation, name=name)
        services.topic_delete(ctx=self.ctx, topic=topic)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopicPartitionsApi(TenantAPIView):
    class InputSerializer(StrictSerializer):
        partitions = serializers.IntegerField(
            min_value=1, max_value=2**31 - 1, help_text="the new total number of partitions"
        )
        validate_only = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        operation_id="topics_add_partitions",
        tags=TAGS,
        parameters=[NAME_PARAM],
        request=InputSerializer,
        responses={200: TopicDetailOutputSerializer, **errors(400, 404)},
    )
    def post(self, request, name: str):
        topic = selectors.topic_get(organisation=self.organisation, name=name)
        data = validate_input(self.InputSerializer, request.data)
        topic = services.topic_add_partitions(ctx=self.ctx, topic=topic, **data)
        return Response(topic_data(topic, validate_only=data["validate_only"], detail=True))


class ConfigDefinitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(
        choices=list(KINDS),
        help_text="enum: one of choices; boolean: true/false; duration: milliseconds; size: "
        "bytes; count: a whole number; ratio: 0 to 1",
    )
    unit = serializers.CharField(allow_null=True, help_text="ms, bytes, messages or replicas")
    description = serializers.CharField()
    default = serializers.CharField(help_text="the value when the topic has no override")
    choices = serializers.ListField(child=serializers.CharField())
    special = serializers.DictField(
        child=serializers.CharField(), help_text="values with a meaning of their own (-1: no limit)"
    )
    minimum = serializers.CharField(allow_null=True)
    maximum = serializers.CharField(allow_null=True)


class CreateDefaultSerializer(serializers.Serializer):
    default = serializers.IntegerField()
    maximum = serializers.IntegerField()


class TopicConfigDefinitionsOutputSerializer(serializers.Serializer):
    partitions = CreateDefaultSerializer(help_text="a create without partitions gets the default")
    replication_factor = CreateDefaultSerializer(
        help_text="a create without one gets the default (the CLI sends none); the maximum is "
        "capped by the live brokers"
    )
    configs = ConfigDefinitionSerializer(many=True)


class TopicConfigDefinitionsApi(TenantAPIView):
    @extend_schema(
        operation_id="topic_config_definitions",
        tags=TAGS,
        description="What a new topic gets by default, and every accepted config's kind, "
        "unit, bounds, choices, default and description (docs/topic-configs.md).",
        responses={200: TopicConfigDefinitionsOutputSerializer},
    )
    def get(self, request):
        rf_default, rf_max = services.replication_factor_bounds()
        data = {
            "partitions": {
                "default": settings.SLUICE_DEFAULT_PARTITIONS,
                "maximum": settings.SLUICE_MAX_PARTITIONS_PER_TOPIC,
            },
            "replication_factor": {"default": rf_default, "maximum": rf_max},
            "configs": config_definitions(max_message_bytes=settings.SLUICE_MAX_MESSAGE_BYTES),
        }
        return Response(TopicConfigDefinitionsOutputSerializer(data).data)
