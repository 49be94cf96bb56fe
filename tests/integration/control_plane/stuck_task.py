"""A job that never ends by itself, loaded into a test's Celery worker with ``-I``."""

from __future__ import annotations

import time

from backend.celery import app


@app.task(name="sluice_test.stuck", acks_late=True)
def stuck() -> None:
    time.sleep(600)
