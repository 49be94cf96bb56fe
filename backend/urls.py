"""Routes. Everything under /api/v1/ needs authentication, except the sign-in helpers
(auth/csrf, auth/login); the tests walk this configuration and fail on any route they do not
know, so a new route cannot skip the tenant checks."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from backend.console import spa
from backend.core import apis as core_apis

api_v1 = [
    path("", include("backend.tenancy.urls")),
    path("", include("backend.keys.urls")),
    path("", include("backend.topics.urls")),
    path("", include("backend.acls.urls")),
    path("", include("backend.quotas.urls")),
    path("", include("backend.audit.urls")),
    path("", include("backend.groups.urls")),
    path("", include("backend.analytics.urls")),
    path("", include("backend.cluster.tenant_urls")),
    path("", include("backend.console.urls")),
]

urlpatterns = [
    path("healthz", core_apis.healthz, name="healthz"),
    path("readyz", core_apis.readyz, name="readyz"),
    path("api/v1/", include(api_v1)),
    path("internal/v1/", include("backend.cluster.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # Confluent REST Proxy's admin resources: v3 and the v2 metadata reads (docs/rest-proxy.md)
    path("", include("backend.restproxy.urls")),
    # the console (a single-page app): every other path that is not an API is its route
    re_path(r"^(?!api/|internal/|ws/|static/|assets/|v3/).*$", spa.index, name="console"),
]

handler400 = "backend.core.exceptions.json_400"
handler403 = "backend.core.exceptions.json_403"
handler404 = "backend.restproxy.errors.not_found"
handler500 = "backend.core.exceptions.json_500"
