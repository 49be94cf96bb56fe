"""Broker authentication on the internal routes: ``Authorization: Cluster <secret>``.

One secret shared by the control plane and every broker (``SLUICE_CLUSTER_SECRET``); compared
in constant time. With no secret configured the internal routes refuse everyone. Tenants'
API keys and console sessions are never accepted here (those authentication classes are not
in these views' chain).
"""

from __future__ import annotations

import hmac

from django.conf import settings
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission

KEYWORD = b"cluster"


class BrokerIdentity:
    """The authenticated caller of an internal route: some broker of this cluster."""

    is_authenticated = True
    is_staff = False

    def __str__(self) -> str:
        return "broker"


class ClusterSecretAuthentication(BaseAuthentication):
    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != KEYWORD:
            return None
        expected = str(getattr(settings, "SLUICE_CLUSTER_SECRET", "") or "")
        if len(header) != 2 or not expected:
            raise AuthenticationFailed("this route needs 'Authorization: Cluster <secret>'")
        if not hmac.compare_digest(header[1], expected.encode()):
            raise AuthenticationFailed("wrong cluster secret")
        return BrokerIdentity(), None

    def authenticate_header(self, request) -> str:
        return 'Cluster realm="sluice-internal"'


class IsBroker(BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, BrokerIdentity)
