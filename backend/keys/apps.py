from django.apps import AppConfig


class KeysConfig(AppConfig):
    """API keys of service accounts and the DRF authentication class that checks them."""

    name = "backend.keys"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from backend.keys import schema  # noqa: F401  (registers the OpenAPI auth scheme)
