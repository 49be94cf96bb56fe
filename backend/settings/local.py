"""The embedded default that ``make up`` runs: SQLite under var/, debug on, loopback only."""

from .base import *  # noqa: F403
from .base import SECRET_KEY as _SECRET_KEY

DEBUG = True
SECRET_KEY = _SECRET_KEY or "sluice-local-development-only-not-a-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
