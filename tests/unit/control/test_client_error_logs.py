"""Client errors Django logs (a bad Host header, 4xx lines) are one line without a traceback,
at most ClientErrorLogFilter.PER_MINUTE a minute; server errors are untouched."""

from __future__ import annotations

import io
import logging

from django.test import Client, override_settings

from backend.core.logging import ClientErrorLogFilter
from brokernodes.security.redaction import RedactSecretsFilter


@override_settings(ALLOWED_HOSTS=["testserver"])
def test_bad_host_headers_log_one_line_each_up_to_the_rate(db):
    """Through the configured LOGGING: the root's console handler, its stream swapped."""
    console = next(
        h
        for h in logging.getLogger().handlers
        if any(isinstance(f, RedactSecretsFilter) for f in h.filters)
    )
    for f in console.filters:
        if isinstance(f, ClientErrorLogFilter):
            f.reset()  # the other tests' 4xx lines count against the same minute
    out = io.StringIO()
    previous = console.setStream(out)
    try:
        for i in range(30):
            response = Client().get("/api/v1/topics/", HTTP_HOST=f"evil-{i}.example")
            assert response.status_code == 400
            assert response.json()["error_code"] == "INVALID_REQUEST"
    finally:
        console.setStream(previous)
    text = out.getvalue()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if "Invalid HTTP_HOST" in line]
    assert 1 <= len(lines) <= ClientErrorLogFilter.PER_MINUTE, text


def test_drops_are_counted_and_server_errors_pass():
    f = ClientErrorLogFilter()
    f.PER_MINUTE = 2

    def record(name: str, status: int | None, exc=None) -> logging.LogRecord:
        r = logging.LogRecord(name, logging.WARNING, __file__, 1, "line %s", (status,), exc)
        if status is not None:
            r.status_code = status
        return r

    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        exc = sys.exc_info()
    kept = [f.filter(record("django.request", 404, exc)) for _ in range(5)]
    assert kept == [True, True, False, False, False]
    f._window_start -= f.WINDOW_S  # a minute later
    later = record("django.security.DisallowedHost", None, exc)
    assert f.filter(later) and "3 similar lines dropped" in later.getMessage()
    assert later.exc_info is None
    server_error = record("django.request", 500, exc)
    assert f.filter(server_error) and server_error.exc_info is exc


@override_settings(SLUICE_REQUIRE_HOST=True)
def test_a_request_without_host_is_refused(db):
    response = Client().get("/api/v1/topics/")  # the test client sends no Host
    assert response.status_code == 400
    assert response.json() == {
        "error_code": "INVALID_REQUEST",
        "message": "the request has no Host header",
    }
    assert Client().get("/api/v1/topics/", HTTP_HOST="testserver").status_code == 401
