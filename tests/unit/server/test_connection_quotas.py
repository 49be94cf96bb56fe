"""Connection-count quotas: a tenant's and a principal's open connections against their
``connections`` limits; closed connections stop counting; static keys are never counted."""

from __future__ import annotations

import pytest

from brokernodes.security.quotas import ClientQuotas, QuotaManager
from brokernodes.server.auth import Principal
from brokernodes.server.connections import ConnectionQuotas
from brokernodes.server.throttle import DataPlaneQuotaExceededError


class Conn:
    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed


APP = Principal("User:app", "k1", "org-a")
OPS = Principal("User:ops", "k2", "org-a")
OTHER = Principal("User:app", "k3", "org-b")


def quotas(tenant_limit=None, app_limit=None) -> ConnectionQuotas:
    manager = QuotaManager()
    manager.set_quotas("org-a", ClientQuotas(connections=tenant_limit))
    if app_limit is not None:
        manager.set_quotas("org-a", ClientQuotas(connections=app_limit), "User:app")
    return ConnectionQuotas(lambda: manager)


def test_tenant_limit_counts_each_connection_once():
    cq = quotas(tenant_limit=2)
    a, b, c = Conn(), Conn(), Conn()
    for _ in range(3):  # many requests on one keep-alive connection count once
        cq.admit(a, APP)
    cq.admit(b, OPS)
    assert cq.count("org-a") == 2
    with pytest.raises(DataPlaneQuotaExceededError) as e:
        cq.admit(c, APP)
    assert e.value.error_code == "QUOTA_EXCEEDED" and e.value.details == {
        "quota": "connections",
        "used": 2,
        "limit": 2,
    }
    assert "your organisation" in e.value.message
    # another tenant has its own count; closing a connection frees its place
    cq.admit(Conn(), OTHER)
    a.closed = True
    cq.admit(c, APP)
    assert cq.count("org-a") == 2 and cq.count("org-a", "User:app") == 1


def test_principal_limit_within_the_tenant():
    cq = quotas(tenant_limit=10, app_limit=1)
    cq.admit(Conn(), APP)
    with pytest.raises(DataPlaneQuotaExceededError, match="User:app already holds 1"):
        cq.admit(Conn(), APP)
    cq.admit(Conn(), OPS)  # the other principal is under the tenant limit only


def test_a_connection_reused_by_another_key_moves_its_count():
    cq = quotas(app_limit=1)
    conn = Conn()
    cq.admit(conn, APP)
    cq.admit(conn, OPS)
    assert cq.count("org-a", "User:app") == 0 and cq.count("org-a", "User:ops") == 1
    cq.admit(Conn(), APP)


def test_no_limit_no_tenant_or_no_connection_is_never_refused():
    cq = quotas()
    for _ in range(100):
        cq.admit(Conn(), APP)
    static = Principal("User:static", "k", None)
    limited = quotas(tenant_limit=0)
    limited.admit(Conn(), static)
    limited.admit(None, APP)
    with pytest.raises(DataPlaneQuotaExceededError):
        limited.admit(Conn(), APP)
