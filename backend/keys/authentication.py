"""DRF authentication by API key: ``Authorization: Bearer slk_<key_id>.<secret>``.

Every request reads the key row, so revocation (or deactivating the service account or the
organisation) takes effect on the next request. The secret is never logged or echoed: errors
name at most the key id.
"""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from backend.keys import selectors, tokens
from backend.keys.services import api_key_touch
from backend.tenancy.principal import ServiceAccountPrincipal

_DUMMY_DIGEST = "0" * 64
_FAILED = (
    "unknown, revoked or malformed API key; send 'Authorization: Bearer slk_<key_id>.<secret>' "
    "(the secret is shown only once, when the key is created)"
)


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != b"bearer":
            return None  # not ours: the session (or nothing) decides
        if len(header) != 2:
            raise AuthenticationFailed(_FAILED)
        try:
            token = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(_FAILED) from None
        parsed = tokens.parse_token(token)
        if parsed is None:
            raise AuthenticationFailed(_FAILED)
        key_id, secret = parsed
        key = selectors.api_key_for_authentication(key_id)
        # Compare even when the key is unknown, so timing does not tell which ids exist.
        matches = tokens.secret_matches(secret, key.secret_sha256 if key else _DUMMY_DIGEST)
        if key is None or not matches or key.revoked_at is not None:
            raise AuthenticationFailed(_FAILED)
        sa = key.service_account
        if not sa.is_active or not sa.organisation.is_active:
            raise AuthenticationFailed(_FAILED)
        api_key_touch(key)
        return ServiceAccountPrincipal(sa, key), key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="sluice"'
