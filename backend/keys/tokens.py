"""API key tokens: ``slk_<key_id>.<secret>``, pure functions (no Django).

- ``key_id``: 16 URL-safe characters (12 random bytes, base64url), public, the lookup key;
- ``secret``: 32 random bytes, base64url without padding (43 characters), shown once;
- stored: ``key_id`` and ``sha256(secret)`` as lowercase hex. The secret has 256 bits of
  entropy, so a fast hash is right (a slow KDF protects low-entropy passwords, not this), and
  digests are compared with ``hmac.compare_digest``.

The ``slk_`` prefix lets secret scanners (GitHub, gitleaks) recognise a leaked key:
``slk_[A-Za-z0-9_-]{16}\\.[A-Za-z0-9_-]{43}``. The broker's parser splits at the first ``.``,
so the broker-side key id of a key is ``slk_<key_id>`` (see ``broker_key_id``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

PREFIX = "slk_"
TOKEN_PATTERN = re.compile(r"^slk_([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def new_key_id() -> str:
    return _b64(secrets.token_bytes(12))


def new_secret() -> str:
    return _b64(secrets.token_bytes(32))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def format_token(key_id: str, secret: str) -> str:
    return f"{PREFIX}{key_id}.{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """``slk_<key_id>.<secret>`` -> (key_id, secret), or None when it is not one."""
    m = TOKEN_PATTERN.match(token.strip())
    return (m.group(1), m.group(2)) if m else None


def secret_matches(secret: str, stored_sha256: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_sha256)


def broker_key_id(key_id: str) -> str:
    """The key id as the broker's bearer parser sees it (``<key_id>.<secret>`` split at '.')."""
    return f"{PREFIX}{key_id}"
