"""Confluent's paths: ``/v3/clusters/...`` and the v2 metadata reads (``backend.urls``
mounts both at the root, as Confluent serves them)."""

from django.urls import path

from backend.restproxy import acls, clusters, groups, topics, v2

C = "v3/clusters/<str:cluster_id>/"
T = C + "topics/<str:topic_name>/"
P = T + "partitions/<int:partition_id>"
G = C + "consumer-groups/<str:group_id>/"

v3 = [
    path("v3/clusters", clusters.ClusterListApi.as_view(), name="v3-clusters"),
    path("v3/clusters/<str:cluster_id>", clusters.ClusterDetailApi.as_view(), name="v3-cluster"),
    path(C + "brokers", clusters.BrokerListApi.as_view(), name="v3-brokers"),
    path(C + "brokers/<int:broker_id>", clusters.BrokerDetailApi.as_view(), name="v3-broker"),
    path(C + "topics", topics.TopicListApi.as_view(), name="v3-topics"),
    path(C + "topics/<str:topic_name>", topics.TopicDetailApi.as_view(), name="v3-topic"),
    path(T + "configs", topics.TopicConfigListApi.as_view(), name="v3-topic-configs"),
    path(T + "configs:alter", topics.TopicConfigAlterApi.as_view(), name="v3-topic-configs-alter"),
    path(T + "configs/<str:name>", topics.TopicConfigDetailApi.as_view(), name="v3-topic-config"),
    path(T + "partitions", topics.PartitionListApi.as_view(), name="v3-partitions"),
    path(P, topics.PartitionDetailApi.as_view(), name="v3-partition"),
    path(P + "/replicas", topics.ReplicaListApi.as_view(), name="v3-replicas"),
    path(P + "/replicas/<int:broker_id>", topics.ReplicaDetailApi.as_view(), name="v3-replica"),
    path(C + "consumer-groups", groups.GroupListApi.as_view(), name="v3-groups"),
    path(C + "consumer-groups/<str:group_id>", groups.GroupDetailApi.as_view(), name="v3-group"),
    path(G + "consumers", groups.ConsumerListApi.as_view(), name="v3-consumers"),
    path(G + "consumers/<str:consumer_id>", groups.ConsumerDetailApi.as_view(), name="v3-consumer"),
    path(
        G + "consumers/<str:consumer_id>/assignments",
        groups.ConsumerAssignmentListApi.as_view(),
        name="v3-consumer-assignments",
    ),
    path(G + "lags", groups.LagListApi.as_view(), name="v3-lags"),
    path(
        G + "lags/<str:topic_name>/partitions/<int:partition_id>",
        groups.LagDetailApi.as_view(),
        name="v3-lag",
    ),
    path(G + "lag-summary", groups.LagSummaryApi.as_view(), name="v3-lag-summary"),
    path(C + "acls", acls.AclApi.as_view(), name="v3-acls"),
]

v2_metadata = [
    path("topics", v2.console_or(v2.TopicNamesApi.as_view()), name="v2-topics"),
    path("topics/<str:topic_name>", v2.console_or(v2.TopicApi.as_view()), name="v2-topic"),
    path(
        "topics/<str:topic_name>/partitions",
        v2.console_or(v2.PartitionsApi.as_view()),
        name="v2-partitions",
    ),
    path(
        "topics/<str:topic_name>/partitions/<int:partition_id>",
        v2.console_or(v2.PartitionApi.as_view()),
        name="v2-partition",
    ),
    path("brokers", v2.console_or(v2.BrokersApi.as_view()), name="v2-brokers"),
]

urlpatterns = v3 + v2_metadata
