from django.urls import path

import backend.topics.urls  # noqa: F401  (registers the "topic" path converter)
from backend.console import apis

urlpatterns = [
    path("console/brokers", apis.ConsoleBrokersApi.as_view(), name="console-brokers"),
    path("console/traffic", apis.ConsoleTrafficApi.as_view(), name="console-traffic"),
    path("console/partitions", apis.ConsolePartitionsApi.as_view(), name="console-partitions"),
    path(
        "console/topics/<topic:name>/messages",
        apis.ConsoleMessagesApi.as_view(),
        name="console-messages",
    ),
    path("console/policy", apis.ConsolePolicyApi.as_view(), name="console-policy"),
]
