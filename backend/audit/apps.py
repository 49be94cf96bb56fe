from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit log: one event per control-plane change (who, what, when, from where)."""

    name = "backend.audit"
    default_auto_field = "django.db.models.BigAutoField"
