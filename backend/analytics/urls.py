from django.urls import path

from backend.analytics import apis, live_apis

urlpatterns = [
    path("reports/runs/", apis.RunListApi.as_view(), name="report-runs"),
    path("reports/lag/", apis.LagReportApi.as_view(), name="report-lag"),
    path("reports/throughput/", apis.ThroughputReportApi.as_view(), name="report-throughput"),
    path("reports/retention/", apis.RetentionReportApi.as_view(), name="report-retention"),
    path("reports/peaks/", apis.PeaksReportApi.as_view(), name="report-peaks"),
    path("reports/skew/", apis.SkewReportApi.as_view(), name="report-skew"),
    path("reports/compaction/", apis.CompactionReportApi.as_view(), name="report-compaction"),
    path("reports/usage/", apis.UsageReportApi.as_view(), name="report-usage"),
    path("reports/live/lag/", live_apis.LiveLagApi.as_view(), name="report-live-lag"),
    path(
        "reports/live/throughput/",
        live_apis.LiveThroughputApi.as_view(),
        name="report-live-throughput",
    ),
]
