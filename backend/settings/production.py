"""Production: every secret and address from the environment, secure cookies, HSTS."""

import os

from .base import *  # noqa: F403

SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
# Celery's broker: Redis (docs/analytics.md); CELERY_BROKER_URL wins when set.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or os.environ.get(
    "REDIS_URL", "redis://127.0.0.1:6379/0"
)
CELERY_BROKER_TRANSPORT_OPTIONS = {}
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = 31536000
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Strict"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
