from django.apps import AppConfig


class TopicsConfig(AppConfig):
    """Topics of an organisation: partitions, replication factor, per-topic configs."""

    name = "backend.topics"
    default_auto_field = "django.db.models.BigAutoField"
