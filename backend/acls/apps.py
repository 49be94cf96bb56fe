from django.apps import AppConfig


class AclsConfig(AppConfig):
    """ACL bindings of an organisation, with Kafka's semantics (brokernodes.security.acl)."""

    name = "backend.acls"
    default_auto_field = "django.db.models.BigAutoField"
