"""Logging of the control plane's processes (Daphne/runserver, the controller, management
commands, Celery): Django's ``LOGGING`` as configured, then the one redaction filter
(``brokernodes.security.redaction``, shared with the brokers) on every handler, including
those of loggers that do not propagate to the root (Django's ``django.server``)."""

from __future__ import annotations

import logging.config

from brokernodes.security import redaction


def configure(config: dict | None) -> None:
    """Django's ``LOGGING_CONFIG`` callable (and Celery's ``setup_logging`` hook)."""
    if config:
        logging.config.dictConfig(config)
    redaction.install()
