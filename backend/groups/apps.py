from django.apps import AppConfig


class GroupsConfig(AppConfig):
    """Consumer groups: list, describe (lag), offset resets with undo, delete, by asking the
    group's coordinator broker (docs/consumer-groups.md)."""

    name = "backend.groups"
    default_auto_field = "django.db.models.BigAutoField"
