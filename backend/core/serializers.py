"""Serializer helpers: input serializers that refuse fields they do not declare.

Mass assignment is refused loudly: posting ``organisation``, ``owner``, a quota field or any
other undeclared field is a 400 that names the field, rather than being silently dropped.
"""

from __future__ import annotations

from rest_framework import serializers

PROTECTED_FIELDS = {
    "organisation",
    "organisation_id",
    "owner",
    "owner_id",
    "tenant",
    "is_staff",
    "is_superuser",
    "id",
    "topic_id",
    "key_id",
    "secret",
    "secret_sha256",
    "created_at",
    "created_by",
    "revoked_at",
    "last_used_at",
}


class StrictSerializer(serializers.Serializer):
    """Input serializer: unknown or protected fields are a validation error naming them."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = [k for k in data if k not in self.fields or self.fields[k].read_only]
            if unknown:
                raise serializers.ValidationError(
                    {
                        k: [
                            "this field cannot be set"
                            if k in PROTECTED_FIELDS
                            else "unknown field; see the API schema for the accepted fields"
                        ]
                        for k in unknown
                    }
                )
        return super().to_internal_value(data)


def validate_input(serializer_class: type[serializers.Serializer], data, **kwargs) -> dict:
    """Validate a request body (or query) with an input serializer; returns validated data."""
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
