"""Describes ``ApiKeyAuthentication`` to drf-spectacular as an HTTP bearer scheme."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "backend.keys.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "slk_<key_id>.<secret>",
            "description": "An API key of a service account, shown once when created.",
        }
