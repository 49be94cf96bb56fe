"""Errors of the control-plane API: every 4xx/5xx is ``{"error_code", "message", "fields"?}``.

Services raise ``ApplicationError`` subclasses (no HTTP knowledge beyond a status); the DRF
exception handler below maps those and DRF's own exceptions to the one JSON shape. Error codes
are stable names clients can switch on; messages are for people.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger("backend.errors")


class ApplicationError(Exception):
    """A refusal a client can act on. ``fields`` maps field names to lists of messages."""

    status_code = 400
    error_code = "INVALID_REQUEST"

    def __init__(self, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields


class InvalidRequest(ApplicationError):
    error_code = "INVALID_REQUEST"


class InvalidConfig(ApplicationError):
    error_code = "INVALID_CONFIG"


class QuotaExceeded(ApplicationError):
    error_code = "QUOTA_EXCEEDED"


class NotFound(ApplicationError):
    status_code = 404
    error_code = "NOT_FOUND"


class PermissionDenied(ApplicationError):
    status_code = 403
    error_code = "PERMISSION_DENIED"


class Conflict(ApplicationError):
    status_code = 409
    error_code = "CONFLICT"


class TopicAlreadyExists(Conflict):
    error_code = "TOPIC_ALREADY_EXISTS"


class PayloadTooLarge(drf.APIException):
    """A request body over the control plane's limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``)."""

    status_code = 413
    default_detail = "the request body is too large"
    default_code = "payload_too_large"


class OrganisationRequired(ApplicationError):
    status_code = 400
    error_code = "ORGANISATION_REQUIRED"


_DRF_CODES: list[tuple[type[Exception], str]] = [
    (drf.NotAuthenticated, "NOT_AUTHENTICATED"),
    (drf.AuthenticationFailed, "NOT_AUTHENTICATED"),
    (drf.PermissionDenied, "PERMISSION_DENIED"),
    (drf.NotFound, "NOT_FOUND"),
    (drf.MethodNotAllowed, "METHOD_NOT_ALLOWED"),
    (drf.NotAcceptable, "NOT_ACCEPTABLE"),
    (drf.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"),
    (drf.Throttled, "THROTTLED"),
    (PayloadTooLarge, "PAYLOAD_TOO_LARGE"),
    (drf.ParseError, "INVALID_REQUEST"),
    (drf.ValidationError, "INVALID_REQUEST"),
]


def _as_field_errors(detail: Any) -> dict[str, Any]:
    """DRF's nested ErrorDetail structure -> plain JSON (``{"field": ["message"]}``)."""
    if isinstance(detail, dict):
        return {str(k): _as_field_errors(v) for k, v in detail.items()}
    if isinstance(detail, list):
        if all(not isinstance(v, dict | list) for v in detail):
            return [str(v) for v in detail]  # type: ignore[return-value]
        return [_as_field_errors(v) for v in detail]  # type: ignore[return-value]
    return [str(detail)]  # type: ignore[return-value]


def error_body(error_code: str, message: str, fields: dict[str, Any] | None = None) -> dict:
    body: dict[str, Any] = {"error_code": error_code, "message": message}
    if fields:
        body["fields"] = fields
    return body


def exception_handler(exc: Exception, context: dict) -> Response:
    """DRF ``EXCEPTION_HANDLER``: one JSON shape for every error, never an HTML page."""
    # Imported here: this module is imported by authentication classes, which DRF's views
    # module imports while it initialises.
    from rest_framework.views import set_rollback

    headers: dict[str, str] = {}
    if isinstance(exc, ApplicationError):
        set_rollback()
        return Response(error_body(exc.error_code, exc.message, exc.fields), exc.status_code)
    if isinstance(exc, DjangoValidationError):  # a model's full_clean() in a service
        set_rollback()
        fields = getattr(exc, "message_dict", None)
        if fields:
            return Response(
                error_body("INVALID_REQUEST", "the request has invalid fields", fields), 400
            )
        return Response(error_body("INVALID_REQUEST", "; ".join(exc.messages)), 400)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(too_large_message())
    elif isinstance(exc, SuspiciousOperation):
        exc = drf.ParseError("the request is malformed")
    elif isinstance(exc, RecursionError | OverflowError | DataError):
        # input a view could not handle (nested too deep, a number out of range): the
        # client's doing, so a 400, and logged as a warning without a traceback
        logger.warning("refused a request: %s", type(exc).__name__)
        exc = drf.ParseError("the request holds a value out of range or nested too deep")
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.APIException):
        code = next((c for t, c in _DRF_CODES if isinstance(exc, t)), "INVALID_REQUEST")
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
        set_rollback()
        if isinstance(exc, drf.ValidationError):
            detail = exc.detail
            if isinstance(detail, dict):
                fields = _as_field_errors(detail)
                non_field = fields.pop("non_field_errors", None)
                message = non_field[0] if non_field else "the request has invalid fields"
                return Response(error_body(code, message, fields or None), 400, headers=headers)
            messages = _as_field_errors(detail)
            message = "; ".join(str(m) for m in messages) if isinstance(messages, list) else ""
            return Response(error_body(code, message or "invalid request"), 400, headers=headers)
        message = str(exc.detail) if not isinstance(exc.detail, dict | list) else code
        if isinstance(exc, drf.NotAuthenticated):
            message = (
                "this route needs an API key ('Authorization: Bearer slk_<key_id>.<secret>') "
                "or a console session (POST /api/v1/auth/login)"
            )
        return Response(error_body(code, message), exc.status_code, headers=headers)
    # Anything else is a bug: log it (without the request body) and answer JSON, not HTML.
    logger.exception("unhandled error in %s", type(context.get("view")).__name__)
    set_rollback()
    return Response(
        error_body("INTERNAL_ERROR", "an unexpected error occurred; it has been logged"), 500
    )


def too_large_message() -> str:
    from django.conf import settings

    return f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes"


def json_400(request, exception=None):  # Django ``handler400`` (e.g. an unknown Host)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(error_body("PAYLOAD_TOO_LARGE", too_large_message()), status=413)
    return JsonResponse(error_body("INVALID_REQUEST", "the request is malformed"), status=400)


def json_403(request, exception=None):  # Django ``handler403``
    return JsonResponse(error_body("PERMISSION_DENIED", "permission denied"), status=403)


def json_404(request, exception=None):  # Django ``handler404`` for non-API paths
    return JsonResponse(error_body("NOT_FOUND", "no such route"), status=404)


def json_500(request):  # Django ``handler500``
    return JsonResponse(
        error_body("INTERNAL_ERROR", "an unexpected error occurred; it has been logged"),
        status=500,
    )
