"""OpenAPI pieces shared by every app: the error body and standard error responses."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "error_code": serializers.CharField(help_text="stable, machine-readable name"),
        "message": serializers.CharField(help_text="what went wrong, for a person"),
        "fields": serializers.DictField(
            required=False,
            child=serializers.JSONField(),
            help_text="per-field messages, when the error is about particular fields",
        ),
    },
)


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """Standard error responses: 401/403 always, plus the given statuses."""
    text = {
        400: "invalid request or configuration (error_code names which)",
        401: "NOT_AUTHENTICATED: no valid API key or session",
        403: "PERMISSION_DENIED: the role does not allow this",
        404: "NOT_FOUND: no such object in the current organisation",
        409: "conflict, e.g. TOPIC_ALREADY_EXISTS",
        429: "THROTTLED: too many attempts; see Retry-After",
    }
    out = {}
    for s in sorted({401, 403, *statuses}):
        out[s] = OpenApiResponse(ErrorSerializer, description=text.get(s, "error"))
    return out


class SluiceAutoSchema(AutoSchema):
    """Names nested serializers after their view (HackSoft style puts ``InputSerializer`` in
    every API class): ``TopicListApi.InputSerializer`` -> component ``TopicListInput``."""

    def get_serializer_name(self, serializer, direction) -> str:
        qualname = serializer.__class__.__qualname__
        if "." in qualname:
            outer, inner = qualname.rsplit(".", 1)
            outer = outer.rsplit(".", 1)[-1].removesuffix("Api")
            return outer + inner
        return super().get_serializer_name(serializer, direction)
