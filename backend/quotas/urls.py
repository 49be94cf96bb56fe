from django.urls import path

from backend.quotas import apis

urlpatterns = [
    path("quotas/", apis.QuotaListApi.as_view(), name="quotas"),
    path("quotas/<uuid:quota_id>", apis.QuotaDetailApi.as_view(), name="quota-detail"),
    path(
        "platform/organisations/<str:organisation>/quota",
        apis.PlatformOrganisationQuotaApi.as_view(),
        name="platform-organisation-quota",
    ),
]
