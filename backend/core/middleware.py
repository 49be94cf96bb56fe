"""Refuses malformed requests before anything reads them, on every route (the API, the
internal routes, the console).

A ``Content-Length`` above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is answered 413
``PAYLOAD_TOO_LARGE``, one that is not a number 400 ``INVALID_REQUEST``; a body without a
length (chunked) is bounded by the JSON parser (``backend.core.parsers``). An HTTP/1.1
request without ``Host`` is 400 (RFC 9112 requires it; without it Django would fall back to
the server's own name and accept the request; ``SLUICE_REQUIRE_HOST`` is off only in the test
settings, whose client sends no Host)."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from backend.core.exceptions import error_body, too_large_message


class RequestSizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if (
            settings.SLUICE_REQUIRE_HOST
            and not request.META.get("HTTP_HOST")
            and request.META.get("SERVER_PROTOCOL") != "HTTP/1.0"
        ):
            body = error_body("INVALID_REQUEST", "the request has no Host header")
            return JsonResponse(body, status=400)
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                return JsonResponse(
                    error_body("INVALID_REQUEST", "Content-Length is not a whole number"),
                    status=400,
                )
            if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                body = error_body("PAYLOAD_TOO_LARGE", too_large_message())
                return JsonResponse(body, status=413)
        return self.get_response(request)
