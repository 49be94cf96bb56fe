from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Cross-cutting pieces of the control plane: health checks, shared errors."""

    name = "backend.core"
    default_auto_field = "django.db.models.BigAutoField"
