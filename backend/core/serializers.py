"""Serializer helpers: input serializers that refuse fields they do not declare.

Mass assignment is refused loudly: posting ``organisation``, ``owner``, a quota field or any
other undeclared field is a 400 that names the field, rather than being silently dropped.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from rest_framework import serializers

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _bound_integers(field: serializers.Field) -> None:
    """Give an integer field without bounds the int64 range (the database's BIGINT and
    Kafka's int64): a larger number is a 400 naming the field, not a database error."""
    if isinstance(field, serializers.ListField | serializers.DictField):
        _bound_integers(field.child)
        return
    if not isinstance(field, serializers.IntegerField):
        return
    if field.max_value is None:
        field.max_value = INT64_MAX
        message = field.error_messages["max_value"].format(max_value=INT64_MAX)
        field.validators.append(MaxValueValidator(INT64_MAX, message=message))
    if field.min_value is None:
        field.min_value = INT64_MIN
        message = field.error_messages["min_value"].format(min_value=INT64_MIN)
        field.validators.append(MinValueValidator(INT64_MIN, message=message))


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
    """Input serializer: unknown or protected fields are a validation error naming them;
    integer fields stay within int64."""

    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            _bound_integers(field)
        return fields

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
