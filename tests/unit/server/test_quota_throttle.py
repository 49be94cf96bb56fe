"""The broker's quota glue (``brokernodes.server.throttle``): quotas read from the metadata
image's tenant views, throttle times from the pure ``QuotaManager``, delays, storage refusals,
metrics."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.security.quotas import QuotaKind
from brokernodes.server.auth import Principal
from brokernodes.server.metadata.image import build_image
from brokernodes.server.metrics import BrokerMetrics
from brokernodes.server.protocol.responses import error_body, status_for
from brokernodes.server.throttle import (
    DataPlaneQuotaExceededError,
    QuotaEnforcer,
    client_quotas,
)

ORG_A, ORG_B = "org-a", "org-b"
ALICE = Principal("User:alice", "k1", ORG_A)
BOB = Principal("User:bob", "k2", ORG_A)
CAROL = Principal("User:carol", "k3", ORG_B)
STATIC = Principal("User:test", "k0", None)


def image(*quotas: tuple[str, str | None, dict], version: int = 1):
    state = {
        ("quota", f"q{i}"): {"organisation": org, "principal": principal, "limits": limits}
        for i, (org, principal, limits) in enumerate(quotas)
    }
    return build_image(state, cluster_id="c", broker_id=1, version=version)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def enforcer(current, usage=lambda tenant: 0, metrics=None, sleeps=None):
    clock = Clock()

    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    e = QuotaEnforcer(lambda: current[0], usage, metrics, clock=clock, sleep=sleep)
    return e, clock


def test_control_plane_limits_map_to_client_quotas():
    q = client_quotas(
        {
            "produce_bytes_per_sec": 1000,
            "fetch_bytes_per_sec": None,
            "request_rate": 0,
            "storage_bytes": 5,
            "max_topics": 3,
            "max_partitions": 7,
            "max_connections": 2,
            "unknown_field": 1,
        }
    )
    assert q.producer_byte_rate == 1000
    assert q.consumer_byte_rate is None
    assert q.request_rate == 1  # 0 blocks as far as a rate can
    assert (q.storage_bytes, q.topics, q.partitions, q.connections) == (5, 3, 7, 2)


def test_no_tenant_or_no_quota_is_never_throttled():
    current = [image((ORG_A, None, {"produce_bytes_per_sec": 10}))]
    e, _ = enforcer(current)
    assert e.produce(STATIC, 10**9) == 0  # static-file keys: no tenant
    assert e.produce(None, 10**9) == 0
    assert e.produce(CAROL, 10**9) == 0  # org-b has no quota
    e.check_storage(STATIC)  # no raise


def test_produce_over_the_tenant_rate_is_throttled_and_metered():
    metrics = BrokerMetrics()
    current = [image((ORG_A, None, {"produce_bytes_per_sec": 1000}))]
    e, clock = enforcer(current, metrics=metrics)
    # 10 samples of 1 s is the shortest window: 10,000 bytes at once is exactly the quota
    assert e.produce(ALICE, 10_000) == 0
    throttle = e.produce(ALICE, 5_000)
    assert throttle == 5_000  # (1500 - 1000) / 1000 * 10 s
    # the tenant's aggregate: another principal of the same tenant is throttled too
    assert e.produce(BOB, 1) > 0
    # the fetch rate is another sensor, without a quota
    assert e.fetch(ALICE, 10**6) == 0
    clock.now += 30  # the window has passed
    assert e.produce(ALICE, 100) == 0
    text = metrics.render().decode()
    assert f'sluice_throttle_seconds_total{{quota="produce",tenant="{ORG_A}"}}' in text
    assert f'sluice_throttled_requests_total{{quota="produce",tenant="{ORG_A}"}} 2.0' in text


def test_the_stricter_of_tenant_and_principal_quota_applies():
    current = [
        image(
            (ORG_A, None, {"produce_bytes_per_sec": 1_000_000}),
            (ORG_A, "User:alice", {"produce_bytes_per_sec": 100}),
        )
    ]
    e, _ = enforcer(current)
    assert e.produce(ALICE, 2_000) > 0  # alice's own quota (100/s)
    assert e.produce(BOB, 2_000) == 0  # bob: only the tenant's


def test_request_rate_throttles_any_request():
    current = [image((ORG_A, None, {"request_rate": 1}))]
    e, _ = enforcer(current)
    throttles = [e.fetch(ALICE, 0) for _ in range(12)]
    assert throttles[:10] == [0] * 10 and throttles[-1] > 0


def test_quotas_follow_the_metadata_image():
    current = [image()]
    e, _ = enforcer(current)
    assert e.produce(ALICE, 100_000) == 0
    current[0] = image((ORG_A, None, {"produce_bytes_per_sec": 1000}), version=2)
    assert e.produce(ALICE, 1) > 0  # the sensor already holds 100,000 bytes
    assert e.manager.quotas(ORG_A).producer_byte_rate == 1000
    current[0] = image(version=3)  # the quota record was deleted
    assert e.produce(ALICE, 1) == 0
    assert e.manager.quotas(ORG_A).producer_byte_rate is None


def test_delay_sleeps_for_the_throttle_only_when_there_is_one():
    sleeps: list[float] = []
    current = [image((ORG_A, None, {"fetch_bytes_per_sec": 100}))]
    e, _ = enforcer(current, sleeps=sleeps)
    assert asyncio.run(e.throttle_fetch(ALICE, 500)) == 0
    assert sleeps == []
    throttle = asyncio.run(e.throttle_fetch(ALICE, 1000))
    assert throttle == 5000 and sleeps == [5.0]
    assert asyncio.run(e.throttle_produce(ALICE, 10**6)) == 0  # no produce quota


def test_delay_blocks_only_the_waiting_task():
    async def main():
        current = [image((ORG_A, None, {"produce_bytes_per_sec": 1000}))]
        e = QuotaEnforcer(lambda: current[0], lambda t: 0)  # real clock and sleep
        e.produce(ALICE, 10_000)
        slow = asyncio.create_task(e.throttle_produce(ALICE, 50))  # 50 ms throttle
        fast = asyncio.create_task(e.throttle_produce(CAROL, 10**6))
        await fast
        assert not slow.done()  # the other tenant answered while alice waits
        assert await slow == 500 // 10

    asyncio.run(main())


def test_storage_quota_refuses_at_or_over_the_limit():
    used = {ORG_A: 0}
    current = [image((ORG_A, None, {"storage_bytes": 1000}))]
    e, _ = enforcer(current, usage=used.__getitem__)
    e.check_storage(ALICE)
    used[ORG_A] = 999
    e.check_storage(ALICE)
    used[ORG_A] = 1000
    with pytest.raises(DataPlaneQuotaExceededError) as info:
        e.check_storage(ALICE)
    err = info.value
    assert err.error_code == "QUOTA_EXCEEDED" and status_for(err.error_code) == 403
    assert "1000 bytes" in err.message and "storage limit of 1000 bytes" in err.message
    assert error_body(err) == {
        "error_code": "QUOTA_EXCEEDED",
        "message": err.message,
        "quota": "storage_bytes",
        "used": 1000,
        "limit": 1000,
    }
    e.check_storage(CAROL)  # another tenant: no limit, usage never asked


def test_record_kinds_are_the_quota_kinds():
    current = [image((ORG_A, None, {"consumer_byte_rate": 10}))]  # Kafka's name works too
    e, _ = enforcer(current)
    assert e.record(ALICE, QuotaKind.FETCH, 1000) > 0
