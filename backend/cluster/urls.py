from django.urls import path

from backend.cluster import apis

urlpatterns = [
    path("brokers/register", apis.BrokerRegisterApi.as_view(), name="internal-broker-register"),
    path("brokers/heartbeat", apis.BrokerHeartbeatApi.as_view(), name="internal-broker-heartbeat"),
    path("metadata", apis.MetadataApi.as_view(), name="internal-metadata"),
    path(
        "brokers/controlled-shutdown",
        apis.ControlledShutdownApi.as_view(),
        name="internal-broker-controlled-shutdown",
    ),
    path("partitions/alter", apis.AlterPartitionApi.as_view(), name="internal-alter-partition"),
    path("partitions", apis.PartitionStatesApi.as_view(), name="internal-partitions"),
    path(
        "partitions/preferred-election",
        apis.PreferredElectionApi.as_view(),
        name="internal-preferred-election",
    ),
    path(
        "partitions/reassignment",
        apis.ReassignmentApi.as_view(),
        name="internal-reassignment",
    ),
    path("controller", apis.ControllerStatusApi.as_view(), name="internal-controller"),
]
