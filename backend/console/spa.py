"""Serving the built console: ``index.html`` for every console route (the single-page app's
router takes it from there); the hashed assets are served by WhiteNoise (``WHITENOISE_ROOT``
is ``frontend/dist``), cached forever because their names change with their content."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

NOT_BUILT = (
    "<!doctype html><title>Sluice</title><p>The console is not built. Run "
    "<code>make up</code> (it builds it), or <code>npm ci &amp;&amp; npm run build "
    "--workspace frontend</code>. The API is at <a href='/api/docs/'>/api/docs/</a>.</p>"
)


@require_safe
@ensure_csrf_cookie
def index(request) -> HttpResponse:
    page = settings.SLUICE_CONSOLE_DIST / "index.html"
    try:
        body, status = page.read_bytes(), 200
    except FileNotFoundError:
        body, status = NOT_BUILT.encode(), 200
    resp = HttpResponse(body, status=status, content_type="text/html; charset=utf-8")
    resp["Cache-Control"] = "no-cache"
    return resp
