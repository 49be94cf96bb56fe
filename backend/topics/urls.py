from django.urls import path, register_converter

from backend.core.converters import TopicNameConverter
from backend.topics import apis

register_converter(TopicNameConverter, "topic")

urlpatterns = [
    path("topics/", apis.TopicListApi.as_view(), name="topics"),
    path(
        "topic-config-definitions",
        apis.TopicConfigDefinitionsApi.as_view(),
        name="topic-config-definitions",
    ),
    path("topics/<topic:name>", apis.TopicDetailApi.as_view(), name="topic-detail"),
    path(
        "topics/<topic:name>/partitions",
        apis.TopicPartitionsApi.as_view(),
        name="topic-partitions",
    ),
]
