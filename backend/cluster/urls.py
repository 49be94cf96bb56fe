from django.urls import path

from backend.cluster import apis

urlpatterns = [
    path("brokers/register", apis.BrokerRegisterApi.as_view(), name="internal-broker-register"),
    path("brokers/heartbeat", apis.BrokerHeartbeatApi.as_view(), name="internal-broker-heartbeat"),
    path("metadata", apis.MetadataApi.as_view(), name="internal-metadata"),
]
