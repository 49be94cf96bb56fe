"""The embedded default that ``make up`` runs: SQLite under var/, loopback only, DEBUG off
(an error page must not list the routes or settings), a secret generated once into var/."""

from .base import *  # noqa: F403
from .base import SECRET_KEY as _SECRET_KEY
from .base import VAR_DIR as _VAR_DIR
from .secret_file import load_or_create

DEBUG = False
SECRET_KEY = _SECRET_KEY or load_or_create(_VAR_DIR / "secret_key")
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
