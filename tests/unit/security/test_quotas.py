"""Client quotas in simulated time: throttling converges on the quota, windows roll, and the
stricter of the tenant's and the principal's quota applies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.security.quotas import (
    ClientQuotas,
    QuotaConfig,
    QuotaExceededError,
    QuotaKind,
    QuotaManager,
    Rate,
    check_count,
    check_storage,
    throttle_time_ms,
    validate_quotas,
)

MB = 1_000_000


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def manager(**config) -> tuple[QuotaManager, FakeClock]:
    clock = FakeClock()
    return QuotaManager(QuotaConfig(**config), clock=clock), clock


def simulate(
    m: QuotaManager,
    clock: FakeClock,
    principal: str,
    rate: float,
    seconds: float,
    batch: int = 16_384,
    kind: QuotaKind = QuotaKind.PRODUCE,
    tenant: str = "acme",
) -> tuple[float, int]:
    """One client with one request in flight wanting ``rate`` B/s: it sends a batch, waits
    for the response (delayed by the throttle time) and sends again when its own pace says.
    Returns the rate achieved over the second half and the largest throttle seen."""
    start, interval = clock.now, batch / rate
    sent, worst = [], 0
    while clock.now - start < seconds:
        throttle = m.record(kind, tenant, principal, batch)
        worst = max(worst, throttle)
        sent.append(clock.now)
        clock.now += max(interval, throttle / 1000)
    half = start + seconds / 2
    late = [t for t in sent if t >= half]
    return len(late) * batch / (clock.now - half), worst


# -- the formula --------------------------------------------------------------------------------


def test_throttle_formula_is_kafkas():
    # 15 MB at once against 1 MB/s over a fresh 11 x 1 s window (10 s minimum): 1.5 MB/s,
    # so 5 s of silence brings the 15 MB back to 1 MB/s over 15 s.
    m, _ = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    assert m.record_produce("acme", "User:a", 15 * MB) == 5000
    assert throttle_time_ms(1.5 * MB, MB, 10.0, 11_000) == 5000
    assert throttle_time_ms(MB, MB, 10.0, 11_000) == 0
    assert throttle_time_ms(100 * MB, MB, 10.0, 11_000) == 11_000


def test_throttle_is_bounded_by_max_throttle():
    m, _ = manager(max_throttle_ms=2000)
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    assert m.record_produce("acme", "User:a", 100 * MB) == 2000
    m2, _ = manager()
    m2.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    assert m2.record_produce("acme", "User:a", 100 * MB) == 11_000  # the whole window


# -- convergence ---------------------------------------------------------------------------------


@pytest.mark.parametrize("max_throttle_ms", [None, 1000])
@pytest.mark.parametrize("batch", [4096, 65_536])
def test_producer_at_twice_the_quota_converges_within_10_percent(max_throttle_ms, batch):
    m, clock = manager(max_throttle_ms=max_throttle_ms)
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    achieved, worst = simulate(m, clock, "User:a", 2 * MB, seconds=120, batch=batch)
    assert worst > 0
    assert abs(achieved - MB) / MB < 0.10, achieved


def test_fetch_and_request_rates_converge_too():
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(consumer_byte_rate=MB, request_rate=50))
    achieved, _ = simulate(m, clock, "User:a", 3 * MB, seconds=120, kind=QuotaKind.FETCH)
    assert abs(achieved - MB) / MB < 0.10
    achieved, _ = simulate(m, clock, "User:a", 100, seconds=120, batch=1, kind=QuotaKind.REQUEST)
    assert abs(achieved - 50) / 50 < 0.10
    assert m.record_request("acme", "User:a") >= 0


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.99])
def test_traffic_under_the_quota_is_never_throttled(fraction):
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    _, worst = simulate(m, clock, "User:a", fraction * MB, seconds=60)
    assert worst == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(1, 200_000)), min_size=1, max_size=200))
def test_bursty_traffic_whose_every_window_is_under_quota_is_never_throttled(gaps_and_sizes):
    # Keep each request no bigger than what its gap earns at 80% of the quota, so the rate
    # over any window stays below it: Kafka's minimum window keeps early bursts in bounds.
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    for gap, size in gaps_and_sizes:
        clock.now += gap
        earned = int(0.8 * MB * max(gap, 1.0))
        assert m.record_produce("acme", "User:a", min(size, earned)) == 0


# -- windows -------------------------------------------------------------------------------------


def test_windows_roll_and_old_samples_expire():
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    assert m.record_produce("acme", "User:a", 20 * MB) > 0
    assert m.rate(QuotaKind.PRODUCE, "acme", "User:a") == pytest.approx(2 * MB)
    clock.now += 5
    assert m.rate(QuotaKind.PRODUCE, "acme", "User:a") == pytest.approx(2 * MB)  # still in window
    clock.now += 6  # 11 s later the 11 x 1 s window no longer holds the burst
    assert m.rate(QuotaKind.PRODUCE, "acme", "User:a") == 0
    assert m.record_produce("acme", "User:a", 1000) == 0


def test_rate_averages_over_the_elapsed_window_once_it_is_full():
    config = QuotaConfig(num_samples=4, sample_seconds=1.0)
    rate = Rate(config)
    for t in range(10):
        rate.record(100, float(t))
    # samples started at 6, 7, 8, 9 hold 400 bytes; the window spans 6..9.5
    assert rate.window_seconds(9.5) == pytest.approx(3.5)
    assert rate.measure(9.5) == pytest.approx(400 / 3.5)


def test_a_fresh_rate_uses_the_minimum_window():
    rate = Rate(QuotaConfig(num_samples=11, sample_seconds=1.0))
    rate.record(1000, 0.0)
    assert rate.window_seconds(0.0) == 10.0
    assert rate.measure(0.5) == pytest.approx(1000 / 10.5)


def test_rate_of_unknown_sensor_is_zero_and_idle_sensors_expire():
    m, clock = manager(inactive_sensor_expiration_seconds=60)
    assert m.rate(QuotaKind.FETCH, "acme", "User:a") == 0.0
    m.record_fetch("acme", "User:a", 10)
    m.record_fetch("acme", "User:b", 10)
    clock.now += 30
    m.record_fetch("acme", "User:b", 10)
    clock.now += 40
    assert m.expire() == 1  # User:a's sensor; User:b and the tenant aggregate stay
    assert m.rate(QuotaKind.FETCH, "acme", "User:a") == 0.0
    clock.now += 61
    assert m.expire() == 2


# -- tenant vs principal --------------------------------------------------------------------------


def test_principal_quota_stricter_than_tenant_quota_applies():
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=10 * MB))
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB), principal="User:small")
    assert m.effective_rate_quota(QuotaKind.PRODUCE, "acme", "User:small") == MB
    assert m.effective_rate_quota(QuotaKind.PRODUCE, "acme", "User:other") == 10 * MB
    achieved, _ = simulate(m, clock, "User:small", 2 * MB, seconds=120)
    assert abs(achieved - MB) / MB < 0.10


def test_tenant_quota_stricter_than_principal_quota_applies():
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=10 * MB), principal="User:big")
    assert m.effective_rate_quota(QuotaKind.PRODUCE, "acme", "User:big") == MB
    achieved, _ = simulate(m, clock, "User:big", 2 * MB, seconds=120)
    assert abs(achieved - MB) / MB < 0.10


def test_tenant_quota_is_shared_by_its_principals_and_not_by_other_tenants():
    m, clock = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    m.set_quotas("globex", ClientQuotas(producer_byte_rate=MB))
    batch, step = 10_000, 0.01
    # acme's two principals want 1 MB/s each (2x acme's quota); globex's wants 0.8x its own
    wants = {"User:a": MB, "User:b": MB, "User:g": 0.8 * MB}
    next_send = {"User:a": clock.now, "User:b": clock.now, "User:g": clock.now}
    tenant_of = {"User:a": "acme", "User:b": "acme", "User:g": "globex"}
    sent = {p: 0 for p in next_send}
    globex_throttles = []
    start = clock.now
    while clock.now - start < 120:
        for p, due in next_send.items():
            if clock.now >= due:
                throttle = m.record_produce(tenant_of[p], p, batch)
                if clock.now - start >= 60:
                    sent[p] += batch
                if p == "User:g":
                    globex_throttles.append(throttle)
                next_send[p] = clock.now + max(batch / wants[p], throttle / 1000)
        clock.now += step
    acme = (sent["User:a"] + sent["User:b"]) / 60
    assert abs(acme - MB) / MB < 0.10, acme
    assert abs(sent["User:a"] - sent["User:b"]) / sent["User:a"] < 0.2  # shared fairly
    assert max(globex_throttles) == 0


def test_unlimited_without_quotas_and_quotas_can_be_removed():
    m, _ = manager()
    assert m.record_produce("acme", "User:a", 10**12) == 0
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB), principal="User:a")
    assert m.record_produce("acme", "User:a", 10**9) > 0
    assert m.quotas("acme", "User:a").producer_byte_rate == MB
    m.remove_quotas("acme", "User:a")
    assert m.record_produce("acme", "User:a", 10**9) == 0
    assert m.quotas("acme") == ClientQuotas()
    m.remove_quotas("acme")  # removing nothing is fine


def test_kinds_are_independent():
    m, _ = manager()
    m.set_quotas("acme", ClientQuotas(producer_byte_rate=MB))
    assert m.record_fetch("acme", "User:a", 100 * MB) == 0
    assert m.record_produce("acme", "User:a", 100 * MB) > 0


def test_max_value_in_window_bounds_a_fetch():
    m, _ = manager()
    assert m.max_value_in_window(QuotaKind.FETCH, "acme", "User:a") is None
    m.set_quotas("acme", ClientQuotas(consumer_byte_rate=MB))
    assert m.max_value_in_window(QuotaKind.FETCH, "acme", "User:a") == 11 * MB


# -- storage and counts ----------------------------------------------------------------------------


def test_check_storage_is_a_soft_limit():
    assert check_storage(999, 1000) is None
    assert check_storage(10**15, None) is None
    err = check_storage(1000, 1000)
    assert isinstance(err, QuotaExceededError)
    assert err.error_code == "QUOTA_EXCEEDED"
    assert (err.quota, err.used, err.limit) == ("storage_bytes", 1000, 1000)
    assert "storage quota of 1000 bytes" in err.message


def test_check_count_is_a_hard_limit():
    assert check_count("topics", 9, 1, 10) is None
    assert check_count("partitions", 0, 100, None) is None
    err = check_count("partitions", 8, 3, 10)
    assert err is not None and err.quota == "partitions"
    assert "exceed the quota of 10 partitions" in str(err)


def test_manager_checks_use_the_configured_limits():
    m, _ = manager()
    m.set_quotas("acme", ClientQuotas(storage_bytes=100, topics=2, connections=5))
    m.set_quotas("acme", ClientQuotas(connections=1), principal="User:a")
    assert m.check_storage("acme", 99) is None
    assert m.check_storage("acme", 100) is not None
    assert m.check_storage("globex", 10**12) is None
    assert m.check_count("acme", "topics", 2) is not None
    assert m.check_count("acme", "connections", 4) is None
    assert m.check_count("acme", "connections", 1, principal="User:a") is not None
    with pytest.raises(ValueError, match="not a count quota"):
        m.check_count("acme", "storage_bytes", 1)


# -- validation and the JSON form --------------------------------------------------------------


def test_validate_quotas_field_errors():
    errors = validate_quotas(
        {
            "producer_byte_rate": 0,
            "consumer_byte_rate": "fast",
            "request_rate": float("inf"),
            "topics": -1,
            "partitions": 1.5,
            "connections": True,
            "bogus": 1,
        }
    )
    assert set(errors) == {
        "producer_byte_rate",
        "consumer_byte_rate",
        "request_rate",
        "topics",
        "partitions",
        "connections",
        "bogus",
    }
    assert validate_quotas({"producer_byte_rate": 1.5, "topics": 0, "storage_bytes": None}) == {}


def test_client_quotas_round_trip_and_refuse_bad_values():
    q = ClientQuotas(producer_byte_rate=MB, storage_bytes=10**9)
    assert ClientQuotas.from_dict({**q.to_dict(), "extra": 1}) == q
    assert q.rate(QuotaKind.PRODUCE) == MB and q.rate(QuotaKind.FETCH) is None
    with pytest.raises(ValueError, match="producer_byte_rate"):
        ClientQuotas(producer_byte_rate=-1)


def test_config_validation():
    with pytest.raises(ValueError):
        QuotaConfig(num_samples=1)
    with pytest.raises(ValueError):
        QuotaConfig(sample_seconds=0)
    assert QuotaConfig().max_throttle == 11_000
