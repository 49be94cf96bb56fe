from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    """Scheduled PySpark reports (lag, throughput, retention, usage) and the reports API."""

    name = "backend.analytics"
    default_auto_field = "django.db.models.BigAutoField"
