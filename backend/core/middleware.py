"""Refuses a request whose declared body is over the limit before anything reads it.

A ``Content-Length`` above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is answered 413
``PAYLOAD_TOO_LARGE``, one that is not a number 400 ``INVALID_REQUEST``, on every route
(the API, the internal routes, the console). A body without a length (chunked) is bounded by
the JSON parser (``backend.core.parsers``)."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from backend.core.exceptions import error_body, too_large_message


class RequestSizeLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
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
