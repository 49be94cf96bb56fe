"""Logging of the control plane's processes (Daphne/runserver, the controller, management
commands, Celery): Django's ``LOGGING`` as configured, then the one redaction filter
(``brokernodes.security.redaction``, shared with the brokers) on every handler, including
those of loggers that do not propagate to the root (Django's ``django.server``); and the
filter that keeps client errors to one rate-limited line each."""

from __future__ import annotations

import logging
import logging.config
import threading
import time

from brokernodes.security import redaction


def configure(config: dict | None) -> None:
    """Django's ``LOGGING_CONFIG`` callable (and Celery's ``setup_logging`` hook)."""
    if config:
        logging.config.dictConfig(config)
    redaction.install()


class ClientErrorLogFilter(logging.Filter):
    """Client errors logged by Django (``django.security.*``, e.g. a bad Host header, and
    ``django.request`` 4xx lines) become one line without a traceback, at most
    ``PER_MINUTE`` a minute; the first line after a minute with drops says how many were
    dropped. An unauthenticated client cannot fill the logs with tracebacks."""

    PER_MINUTE = 10
    WINDOW_S = 60.0

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._count = 0
        self._dropped = 0

    def reset(self) -> None:
        """Start a new minute (tests)."""
        with self._lock:
            self._window_start, self._count, self._dropped = time.monotonic(), 0, 0

    @staticmethod
    def _is_client_error(record: logging.LogRecord) -> bool:
        if record.name.startswith("django.security"):
            return True
        status = getattr(record, "status_code", None)
        return record.name == "django.request" and status is not None and status < 500

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._is_client_error(record):
            return True
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        with self._lock:
            now = time.monotonic()
            dropped = 0
            if now - self._window_start >= self.WINDOW_S:
                dropped, self._dropped = self._dropped, 0
                self._window_start, self._count = now, 0
            self._count += 1
            if self._count > self.PER_MINUTE:
                self._dropped += 1
                return False
        if dropped:
            record.msg = f"{record.getMessage()} ({dropped} similar lines dropped before this)"
            record.args = None
        return True
