"""Per-tenant caps (``tenant_caps``) and the stream registry's use of them: the tenant's
quota, else the default; the principal's quota within it; the broker's ceiling over all."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.security.quotas import ClientQuotas, QuotaManager
from brokernodes.server.protocol.responses import error_body, status_for
from brokernodes.server.tenant_caps import TenantCap, TooManyStreamsError
from brokernodes.server.ws_registry import WebSocketRegistry, WebSocketSession

CAP = TenantCap("streams", "WebSocket streams", per_tenant=2, total=5, error=TooManyStreamsError)


def check(manager=None, tenant="t", principal="User:a", *, mine=0, account=0, total=0):
    CAP.check(
        manager, tenant, principal, tenant_used=mine, principal_used=account, total_used=total
    )


def test_default_quota_principal_and_ceiling():
    check(mine=1, total=4)
    with pytest.raises(TooManyStreamsError) as e:
        check(mine=2, total=2)
    assert (e.value.scope, e.value.used, e.value.limit) == ("tenant", 2, 2)
    assert status_for(e.value.error_code) == 429
    assert error_body(e.value)["cap"] == "streams"

    m = QuotaManager()
    m.set_quotas("t", ClientQuotas(streams=4))
    check(m, mine=3, total=3)  # the tenant's quota replaces the default
    m.set_quotas("t", ClientQuotas(streams=1), principal="User:a")
    with pytest.raises(TooManyStreamsError) as e:
        check(m, mine=1, account=1, total=1)
    assert e.value.scope == "principal"
    with pytest.raises(TooManyStreamsError) as e:
        check(m, mine=0, total=5)  # the broker's ceiling holds whatever the quotas say
    assert e.value.scope == "broker"


def test_registry_counts_bound_streams_per_tenant():
    async def go():
        reg = WebSocketRegistry(CAP)
        sessions = []
        for tenant in ("a", "a", "b"):
            s = WebSocketSession("consume")
            reg.add(s)
            reg.bind(s, f"key-{tenant}", f"User:{tenant}", tenant)
            sessions.append(s)
        extra = WebSocketSession("consume")
        reg.add(extra)
        with pytest.raises(TooManyStreamsError):
            reg.bind(extra, "key-a", "User:a", "a")
        reg.bind(extra, "key-b", "User:b", "b")  # another tenant still gets one
        reg.remove(sessions[0])
        again = WebSocketSession("produce")
        reg.add(again)
        reg.bind(again, "key-a", "User:a", "a")  # a closed stream frees its place

    asyncio.run(go())
