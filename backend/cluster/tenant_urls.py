from django.urls import path

from backend.cluster import tenant_apis

urlpatterns = [
    path(
        "cluster/partitions",
        tenant_apis.ClusterPartitionsApi.as_view(),
        name="cluster-partitions",
    ),
]
