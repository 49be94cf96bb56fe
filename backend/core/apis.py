"""Health and readiness endpoints: unauthenticated, they reveal nothing but liveness."""

from django.db import connection
from django.http import JsonResponse


def healthz(request):
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request):
    """Readiness: the database answers a trivial query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # a readiness probe reports any failure as not ready
        return JsonResponse(
            {"status": "unavailable", "error_code": "DATABASE_UNAVAILABLE", "message": str(exc)},
            status=503,
        )
    return JsonResponse({"status": "ready"})
