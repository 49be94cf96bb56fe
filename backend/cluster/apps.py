from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """Brokers (registry, heartbeats), partition assignments and the versioned metadata log."""

    name = "backend.cluster"
    default_auto_field = "django.db.models.BigAutoField"
