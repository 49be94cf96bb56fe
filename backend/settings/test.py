"""Settings for the test suite: an in-memory SQLite unless DATABASE_URL says otherwise."""

import os

import dj_database_url

from .base import *  # noqa: F403

SECRET_KEY = "sluice-test-only-not-a-secret"
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
DATABASES = {"default": dj_database_url.parse(os.environ.get("DATABASE_URL", "sqlite://:memory:"))}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The suite signs in more often than a person would; test_auth checks the brake itself.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"login": "1000/min"}}  # noqa: F405

SLUICE_CLUSTER_SECRET = "sluice-test-cluster-secret"
# Django's test client sends no Host header (test_client_error_logs.py turns the check on)
SLUICE_REQUIRE_HOST = False
# Unit tests count partitions and records exactly: no internal topics (__consumer_offsets,
# __usage) appear when their brokers register; tests/unit/control/test_internal_topics.py and
# the integration tests (local settings) cover them.
SLUICE_CREATE_INTERNAL_TOPICS = False
# Celery: tests never enqueue into var/ (tests/spark runs a real worker against Redis)
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "memory://")
CELERY_BROKER_TRANSPORT_OPTIONS = {}
