from django.urls import path

from backend.core import apis as core_apis

urlpatterns = [
    path("healthz", core_apis.healthz, name="healthz"),
    path("readyz", core_apis.readyz, name="readyz"),
]
