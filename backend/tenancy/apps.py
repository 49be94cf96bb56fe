from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Organisations (tenants), their members and service accounts; the tenant choke point."""

    name = "backend.tenancy"
    default_auto_field = "django.db.models.BigAutoField"
