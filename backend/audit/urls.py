from django.urls import path

from backend.audit import apis

urlpatterns = [path("audit", apis.AuditEventListApi.as_view(), name="audit")]
