"""Settings shared by every environment; everything that differs comes from the environment."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("SLUICE_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
DEBUG = False
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "backend.core",
    "backend.tenancy",
    "backend.keys",
    "backend.topics",
    "backend.acls",
    "backend.quotas",
    "backend.audit",
    "backend.cluster",
    "backend.groups",
    "backend.analytics",
    "channels",
    "backend.console",
]

MIDDLEWARE = [
    "backend.core.middleware.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "backend.console.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# The largest request body (bytes): larger is 413 PAYLOAD_TOO_LARGE on every route.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("SLUICE_MAX_REQUEST_BYTES", str(2621440)))

# An HTTP/1.1 request without Host is 400 (backend.core.middleware).
SLUICE_REQUIRE_HOST = True

ROOT_URLCONF = "backend.urls"
WSGI_APPLICATION = "backend.wsgi.application"
ASGI_APPLICATION = "backend.asgi.application"
# The live tail needs no cross-process messages; Redis (channels-redis) when it does.
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'sluice.sqlite3'}"),
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers take the write lock when their transaction begins, so concurrent writes (the
    # metadata log serialises on one row) wait for each other instead of failing to upgrade
    # a read lock ("database is locked"). WAL lets readers (the brokers' metadata long polls,
    # the console) run beside the one writer instead of waiting for it.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# The built console (docs/console.md): WhiteNoise serves frontend/dist at /, hashed assets
# cached for a year; backend.console.spa answers index.html for the console's routes.
SLUICE_CONSOLE_DIST = Path(os.environ.get("SLUICE_CONSOLE_DIST", BASE_DIR / "frontend" / "dist"))
WHITENOISE_ROOT = SLUICE_CONSOLE_DIST if SLUICE_CONSOLE_DIST.is_dir() else None
WHITENOISE_IMMUTABLE_FILE_TEST = r"^/?assets/.+-[A-Za-z0-9_-]{8,}\.\w+$"
# STATIC_ROOT is empty unless collectstatic ran (the API needs no static files): not a warning
warnings.filterwarnings("ignore", message="No directory at: ", category=UserWarning)

REST_FRAMEWORK = {
    # API keys first: a request with a Bearer header is a machine client; otherwise the
    # console's session (with CSRF on writes). Unauthenticated requests get 401.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "backend.keys.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # bounded in size (DATA_UPLOAD_MAX_MEMORY_SIZE) and nesting depth: backend/core/parsers.py
    "DEFAULT_PARSER_CLASSES": ["backend.core.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "backend.core.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "backend.core.schema.SluiceAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Sign-in attempts per client address (brute-force brake); 429 THROTTLED beyond it. The
    # address is the peer's (X-Forwarded-For only from SLUICE_TRUSTED_PROXIES).
    "DEFAULT_THROTTLE_RATES": {"login": os.environ.get("SLUICE_LOGIN_RATE", "10/min")},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Sluice control plane API",
    "DESCRIPTION": (
        "Organisations, service accounts, API keys, topics, ACLs, quotas and the audit log. "
        "Authenticate with `Authorization: Bearer slk_<key_id>.<secret>` or a console "
        "session (CSRF token in X-CSRFToken on writes). Every error is "
        '`{"error_code", "message", "fields"?}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "PATH_CONVERTER_OVERRIDES": {"topic": str, "keyid": str},
    "ENUM_NAME_OVERRIDES": {
        "MembershipRoleEnum": "backend.tenancy.roles.MEMBERSHIP_ROLES",
        "ServiceAccountRoleEnum": "backend.tenancy.roles.SERVICE_ACCOUNT_ROLES",
        "GroupStateEnum": "backend.groups.apis.GROUP_STATES",
        "GroupTypeEnum": "backend.groups.apis.GROUP_TYPES",
    },
}

# Proxies whose X-Forwarded-For is believed (addresses or networks, comma-separated; none by
# default): the client address of throttles and the audit log (backend.core.client_address).
SLUICE_TRUSTED_PROXIES = [
    p.strip() for p in os.environ.get("SLUICE_TRUSTED_PROXIES", "").split(",") if p.strip()
]
# Per-username sign-in lockout (backend.tenancy.lockout): after LOCKOUT_AFTER failures in a
# row the name is locked for LOCKOUT_S, doubling with each further failure up to
# LOCKOUT_MAX_S; a success, or FAILURE_WINDOW_S without a failure, starts the count afresh.
SLUICE_LOGIN_LOCKOUT_AFTER = int(os.environ.get("SLUICE_LOGIN_LOCKOUT_AFTER", "5"))
SLUICE_LOGIN_LOCKOUT_S = float(os.environ.get("SLUICE_LOGIN_LOCKOUT_S", "30"))
SLUICE_LOGIN_LOCKOUT_MAX_S = float(os.environ.get("SLUICE_LOGIN_LOCKOUT_MAX_S", "900"))
SLUICE_LOGIN_FAILURE_WINDOW_S = float(os.environ.get("SLUICE_LOGIN_FAILURE_WINDOW_S", "3600"))

# How long an invitation to join an organisation waits for its answer (7 days).
SLUICE_INVITATION_TTL_S = float(os.environ.get("SLUICE_INVITATION_TTL_S", str(7 * 86400)))

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

# Logs go to stderr; the redaction filter (brokernodes.security.redaction, the brokers' too)
# removes credentials from every record: LOGGING_CONFIG puts it on every handler.
LOGGING_CONFIG = "backend.core.logging.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "client_errors": {"()": "backend.core.logging.ClientErrorLogFilter"},
        "redact_secrets": {"()": "brokernodes.security.redaction.RedactSecretsFilter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["client_errors", "redact_secrets"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("SLUICE_LOG_LEVEL", "INFO")},
}

# Sluice control-plane settings.
# Replication factor limit until the metadata issue counts live brokers.
SLUICE_MAX_REPLICATION_FACTOR = int(os.environ.get("SLUICE_MAX_REPLICATION_FACTOR", "3"))
SLUICE_DEFAULT_REPLICATION_FACTOR = int(os.environ.get("SLUICE_DEFAULT_REPLICATION_FACTOR", "3"))
SLUICE_DEFAULT_PARTITIONS = int(os.environ.get("SLUICE_DEFAULT_PARTITIONS", "1"))
# A hard ceiling per topic, whatever the organisation's partition quota says.
SLUICE_MAX_PARTITIONS_PER_TOPIC = int(os.environ.get("SLUICE_MAX_PARTITIONS_PER_TOPIC", "10000"))
# The largest max.message.bytes a tenant may set on a topic.
SLUICE_MAX_MESSAGE_BYTES = int(os.environ.get("SLUICE_MAX_MESSAGE_BYTES", str(8 * 1024 * 1024)))
# Whether any signed-in user may create an organisation (else platform staff only).
SLUICE_SELF_SERVICE_ORGANISATIONS = os.environ.get("SLUICE_SELF_SERVICE_ORGANISATIONS", "1") == "1"
# A new organisation's quota (null = unlimited).
SLUICE_DEFAULT_QUOTA = {
    "produce_bytes_per_sec": 10 * 1024 * 1024,
    "fetch_bytes_per_sec": 20 * 1024 * 1024,
    "request_rate": 1000,
    "storage_bytes": 10 * 1024**3,
    "max_topics": 100,
    "max_partitions": 1000,
    "max_connections": 100,
}

# The cluster (docs/metadata-log.md): brokers authenticate on /internal/v1/ with the shared
# secret (empty: internal routes refuse everyone); a broker is live while it heartbeats.
SLUICE_CLUSTER_ID = os.environ.get("SLUICE_CLUSTER_ID", "sluice-local")
SLUICE_CLUSTER_SECRET = os.environ.get("SLUICE_CLUSTER_SECRET", "")
SLUICE_BROKER_HEARTBEAT_INTERVAL_S = float(
    os.environ.get("SLUICE_BROKER_HEARTBEAT_INTERVAL_S", "2")
)
SLUICE_BROKER_SESSION_TIMEOUT_S = float(os.environ.get("SLUICE_BROKER_SESSION_TIMEOUT_S", "10"))
# The controller (docs/controller.md): one active ``run_controller`` by a lease renewed every
# ~lease/4 s; decisions every tick; automatic preferred-leader rebalance once an imbalance
# has lasted the check interval.
SLUICE_CONTROLLER_LEASE_S = float(os.environ.get("SLUICE_CONTROLLER_LEASE_S", "3"))
SLUICE_CONTROLLER_TICK_S = float(os.environ.get("SLUICE_CONTROLLER_TICK_S", "0.2"))
SLUICE_AUTO_LEADER_REBALANCE = os.environ.get("SLUICE_AUTO_LEADER_REBALANCE", "1") == "1"
SLUICE_LEADER_IMBALANCE_CHECK_S = float(os.environ.get("SLUICE_LEADER_IMBALANCE_CHECK_S", "30"))

# Analytics (docs/analytics.md): Celery runs the PySpark jobs on a schedule. The broker is the
# embedded filesystem transport under var/ unless CELERY_BROKER_URL or REDIS_URL says otherwise
# (Redis in production); runs are recorded in the database, so no result backend.
CELERY_BROKER_URL = (
    os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or "filesystem://"
)
CELERY_FILESYSTEM_DIR = Path(os.environ.get("SLUICE_CELERY_DIR", VAR_DIR / "celery"))
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(CELERY_FILESYSTEM_DIR / "queue"),
        "data_folder_out": str(CELERY_FILESYSTEM_DIR / "queue"),
        "processed_folder": str(CELERY_FILESYSTEM_DIR / "processed"),
        "control_folder": str(CELERY_FILESYSTEM_DIR / "control"),  # not the working directory
        "store_processed": False,
        "polling_interval": 0.2,
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {}
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# "job=seconds,..." ; a job missing from the list is not scheduled (POST runs still work)
SLUICE_ANALYTICS_SCHEDULE = os.environ.get(
    "SLUICE_ANALYTICS_SCHEDULE", "lag=300,throughput=900,retention=900,usage=3600"
)
# Brokers the jobs read (default: the registered brokers' URLs) and how far back they look.
SLUICE_ANALYTICS_BOOTSTRAP = os.environ.get("SLUICE_ANALYTICS_BOOTSTRAP", "")
SLUICE_ANALYTICS_LOOKBACK_H = float(os.environ.get("SLUICE_ANALYTICS_LOOKBACK_H", "24"))
SLUICE_ANALYTICS_MIN_STOP_MS = int(os.environ.get("SLUICE_ANALYTICS_MIN_STOP_MS", "60000"))
# A run still queued or running after this long was lost (a killed worker): marked failed.
SLUICE_ANALYTICS_RUN_TIMEOUT_S = float(os.environ.get("SLUICE_ANALYTICS_RUN_TIMEOUT_S", "7200"))
