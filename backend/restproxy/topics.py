"""Topics, their configs, partitions and replicas, as Confluent's v3 resources, over
``backend.topics``' selectors and services (the same validation, quotas and audit trail as
``/api/v1/topics/``). Topic names are the tenant's own plain names."""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.response import Response

from backend.core.exceptions import InvalidRequest, NotFound
from backend.core.serializers import StrictCharField, StrictSerializer, validate_input
from backend.restproxy import shapes
from backend.restproxy.base import ClusterView, no_content
from backend.restproxy.errors import UnknownTopicOrPartition
from backend.topics import selectors, services
from backend.topics.configs import KNOWN_CONFIGS, effective_configs


def topic_of(organisation, name: str):
    """The organisation's topic ``name``, or Confluent's 40403."""
    try:
        return selectors.topic_get(organisation=organisation, name=name)
    except NotFound:
        # the name is not repeated: an answer never echoes another tenant's names
        raise UnknownTopicOrPartition(
            "this organisation has no such topic; list its topics with GET "
            "/v3/clusters/{cluster_id}/topics"
        ) from None


def partition_state_of(topic, partition_id: int) -> dict:
    for state in selectors.topic_partition_states(topic):
        if state["partition"] == partition_id:
            return state
    raise UnknownTopicOrPartition(
        f"topic {topic.name!r} has no partition {partition_id} (it has {topic.partitions})"
    )


def _topic(links, t) -> dict:
    return shapes.topic(links, t.name, t.partitions, t.replication_factor)


class ConfigEntrySerializer(StrictSerializer):
    name = StrictCharField(max_length=255)
    value = serializers.JSONField(required=False, allow_null=True)


class TopicListApi(ClusterView):
    class InputSerializer(StrictSerializer):
        topic_name = StrictCharField(max_length=1000, trim_whitespace=False)
        partitions_count = serializers.IntegerField(
            required=False, min_value=-(2**31), max_value=2**31 - 1
        )
        replication_factor = serializers.IntegerField(
            required=False, min_value=-(2**15), max_value=2**15 - 1
        )
        configs = ConfigEntrySerializer(many=True, required=False)
        validate_only = serializers.BooleanField(required=False, default=False)
        replicas_assignments = serializers.ListField(
            child=serializers.JSONField(), required=False, max_length=10_000
        )

    def get(self, request, cluster_id: str):
        links = self.links()
        data = [_topic(links, t) for t in selectors.topic_list(organisation=self.organisation)]
        return Response(links.listing("KafkaTopicList", data, "topics"))

    def post(self, request, cluster_id: str):
        data = validate_input(self.InputSerializer, request.data)
        if data.get("replicas_assignments"):
            raise InvalidRequest(
                "replicas_assignments is not supported: the control plane places replicas; "
                "send replication_factor instead",
                {"replicas_assignments": ["not supported"]},
            )
        configs: dict = {}
        for entry in data.get("configs") or ():
            if entry["name"] in configs:
                raise InvalidRequest(
                    f"config {entry['name']!r} is given twice", {"configs": ["duplicate name"]}
                )
            configs[entry["name"]] = entry.get("value")
        topic = services.topic_create(
            ctx=self.ctx,
            name=data["topic_name"],
            partitions=data.get("partitions_count"),
            replication_factor=data.get("replication_factor"),
            configs=configs,
            validate_only=data["validate_only"],
        )
        code = status.HTTP_200_OK if data["validate_only"] else status.HTTP_201_CREATED
        return Response(_topic(self.links(), topic), status=code)


class TopicDetailApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str):
        return Response(_topic(self.links(), topic_of(self.organisation, topic_name)))

    def delete(self, request, cluster_id: str, topic_name: str):
        services.topic_delete(ctx=self.ctx, topic=topic_of(self.organisation, topic_name))
        return no_content()


def _config_or_404(topic, name: str) -> None:
    if name not in KNOWN_CONFIGS:
        raise NotFound(
            f"topic {topic.name!r} has no config {name!r}; GET its configs for the names"
        )


class TopicConfigListApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str):
        topic = topic_of(self.organisation, topic_name)
        links = self.links()
        data = shapes.topic_configs(links, topic.name, topic.configs, effective_configs({}))
        return Response(
            links.listing("KafkaTopicConfigList", data, "topics", topic.name, "configs")
        )


class TopicConfigDetailApi(ClusterView):
    class InputSerializer(StrictSerializer):
        value = serializers.JSONField(allow_null=True, help_text="null resets to the default")

    def get(self, request, cluster_id: str, topic_name: str, name: str):
        topic = topic_of(self.organisation, topic_name)
        _config_or_404(topic, name)
        defaults = effective_configs({})
        value = topic.configs.get(name, defaults.get(name, ""))
        overridden = name in topic.configs
        return Response(
            shapes.topic_config(
                self.links(), topic.name, name, value, defaults.get(name), overridden
            )
        )

    def put(self, request, cluster_id: str, topic_name: str, name: str):
        topic = topic_of(self.organisation, topic_name)
        data = validate_input(self.InputSerializer, request.data)
        services.topic_alter_configs(ctx=self.ctx, topic=topic, changes={name: data["value"]})
        return no_content()

    def delete(self, request, cluster_id: str, topic_name: str, name: str):
        topic = topic_of(self.organisation, topic_name)
        _config_or_404(topic, name)
        services.topic_alter_configs(ctx=self.ctx, topic=topic, changes={name: None})
        return no_content()


class AlterEntrySerializer(StrictSerializer):
    name = StrictCharField(max_length=255)
    value = serializers.JSONField(required=False, allow_null=True)
    operation = serializers.ChoiceField(choices=["SET", "DELETE"], required=False, default="SET")

    def validate(self, attrs):
        if attrs["operation"] == "SET" and attrs.get("value") is None:
            raise serializers.ValidationError({"value": ["SET needs a value"]})
        return attrs


class TopicConfigAlterApi(ClusterView):
    """``POST .../configs:alter``: several configs set or reset at once, all or none."""

    class InputSerializer(StrictSerializer):
        data = AlterEntrySerializer(many=True, allow_empty=False)
        validate_only = serializers.BooleanField(required=False, default=False)

    def post(self, request, cluster_id: str, topic_name: str):
        topic = topic_of(self.organisation, topic_name)
        data = validate_input(self.InputSerializer, request.data)
        changes: dict = {}
        for entry in data["data"]:
            if entry["name"] in changes:
                raise InvalidRequest(
                    f"config {entry['name']!r} is given twice", {"data": ["duplicate name"]}
                )
            changes[entry["name"]] = entry.get("value") if entry["operation"] == "SET" else None
        services.topic_alter_configs(
            ctx=self.ctx, topic=topic, changes=changes, validate_only=data["validate_only"]
        )
        return no_content()


class PartitionListApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str):
        topic = topic_of(self.organisation, topic_name)
        links = self.links()
        data = [
            shapes.partition(links, topic.name, s) for s in selectors.topic_partition_states(topic)
        ]
        return Response(
            links.listing("KafkaPartitionList", data, "topics", topic.name, "partitions")
        )


class PartitionDetailApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str, partition_id: int):
        topic = topic_of(self.organisation, topic_name)
        state = partition_state_of(topic, partition_id)
        return Response(shapes.partition(self.links(), topic.name, state))


class ReplicaListApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str, partition_id: int):
        topic = topic_of(self.organisation, topic_name)
        state = partition_state_of(topic, partition_id)
        links = self.links()
        parts = ("topics", topic.name, "partitions", partition_id, "replicas")
        data = shapes.replicas(links, topic.name, state)
        return Response(links.listing("KafkaReplicaList", data, *parts))


class ReplicaDetailApi(ClusterView):
    def get(self, request, cluster_id: str, topic_name: str, partition_id: int, broker_id: int):
        topic = topic_of(self.organisation, topic_name)
        state = partition_state_of(topic, partition_id)
        for replica in shapes.replicas(self.links(), topic.name, state):
            if replica["broker_id"] == broker_id:
                return Response(replica)
        raise NotFound(f"broker {broker_id} holds no replica of {topic.name}-{partition_id}")
