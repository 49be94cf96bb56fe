"""Confluent's error body, built from Sluice's: ``{"error_code": <int>, "message",
"sluice_code", "fields"?}``.

Sluice's exception handler (``backend.core.exceptions``) decides the refusal, its message and
its stable string code as for ``/api/v1``; ``confluent_error`` (pure) only chooses the HTTP
status and integer code Confluent's REST Proxy answers for that kind of refusal, and the
string code moves to ``sluice_code``. Field errors are folded into the message too, because
Confluent's clients show only ``message``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import JsonResponse
from rest_framework import exceptions as drf

from backend.core.exceptions import ApplicationError, NotFound, error_body, json_404

# Confluent's codes: a five-digit refinement of the HTTP status where Confluent has one for
# the cause, else the status itself (as brokernodes.server.protocol.confluent decides too)
UNAUTHORIZED = 40101
FORBIDDEN = 40301
KAFKA_BAD_REQUEST = 40002
UNKNOWN_TOPIC_OR_PARTITION = 40403
NOT_ACCEPTABLE = 40601
UNPROCESSABLE = 422

# Sluice codes of requests Kafka itself would refuse (Confluent answers those 400 / 40002)
_KAFKA_REFUSALS = frozenset(
    {"INVALID_CONFIG", "QUOTA_EXCEEDED", "TOPIC_ALREADY_EXISTS", "CONFLICT", "GROUP_NOT_EMPTY"}
)


class UnknownTopicOrPartition(NotFound):
    """A topic or partition the caller's organisation does not have (Confluent's 40403)."""

    confluent_code = UNKNOWN_TOPIC_OR_PARTITION


def confluent_error(status: int, sluice_code: str, exc: Exception | None = None) -> tuple[int, int]:
    """(HTTP status, Confluent integer code) for a refusal Sluice answered ``status`` with
    ``sluice_code``, raised as ``exc``."""
    code = getattr(exc, "confluent_code", None)
    if code is not None:
        return status, int(code)
    if status == 401:
        return 401, UNAUTHORIZED
    if status == 403:
        return 403, FORBIDDEN
    if status == 406:
        return 406, NOT_ACCEPTABLE
    if sluice_code in _KAFKA_REFUSALS:
        return 400, KAFKA_BAD_REQUEST
    if sluice_code == "INVALID_REQUEST" and isinstance(exc, ApplicationError):
        return 400, KAFKA_BAD_REQUEST  # a service's refusal, as Kafka's InvalidRequest
    if sluice_code == "INVALID_REQUEST" and isinstance(exc, drf.ValidationError):
        return UNPROCESSABLE, UNPROCESSABLE  # the body or query does not fit the schema
    return status, status


def _fold(message: str, fields: Any) -> str:
    if not isinstance(fields, Mapping) or not fields:
        return message
    parts = []
    for name, problems in fields.items():
        text = "; ".join(map(str, problems)) if isinstance(problems, list) else str(problems)
        parts.append(f"{name}: {text}")
    return f"{message} ({', '.join(parts)})"


def confluent_body(status: int, body: Mapping[str, Any], exc: Exception | None = None) -> tuple:
    """(status, Confluent body) for Sluice's error ``body`` answered with ``status``."""
    sluice_code = str(body.get("error_code") or "INTERNAL_ERROR")
    new_status, code = confluent_error(status, sluice_code, exc)
    out: dict[str, Any] = {
        "error_code": code,
        "message": _fold(str(body.get("message") or sluice_code), body.get("fields")),
        "sluice_code": sluice_code,
    }
    if body.get("fields"):
        out["fields"] = body["fields"]
    return new_status, out


def not_found(request, exception=None):
    """Django's ``handler404``: Confluent's body under the Confluent paths, else Sluice's."""
    if request.path.startswith("/v3/"):
        status, body = confluent_body(404, error_body("NOT_FOUND", "no such route"))
        return JsonResponse(body, status=status)
    return json_404(request, exception)
