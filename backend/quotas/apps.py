from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """Quotas per organisation and per service account (brokers enforce the rates)."""

    name = "backend.quotas"
    default_auto_field = "django.db.models.BigAutoField"
