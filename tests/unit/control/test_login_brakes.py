"""Sign-in brakes: the per-address throttle keys on the real peer (X-Forwarded-For only from
trusted proxies), and a username is locked out with back-off after repeated failures, the
same way whether the name exists or not."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from backend.core.client_address import client_address, parse_networks
from backend.tenancy import lockout
from backend.tenancy.models import LoginFailure

PROXIES = parse_networks(("10.0.0.0/8", "::1"))


@pytest.mark.parametrize(
    ("remote", "xff", "proxies", "expected"),
    [
        ("198.51.100.7", "1.2.3.4", (), "198.51.100.7"),  # no trusted proxy: XFF ignored
        ("198.51.100.7", "1.2.3.4", PROXIES, "198.51.100.7"),  # the peer is no proxy
        ("10.0.0.5", "203.0.113.9", PROXIES, "203.0.113.9"),
        ("10.0.0.5", "6.6.6.6, 203.0.113.9", PROXIES, "203.0.113.9"),  # spoofed prefix
        ("10.0.0.5", "203.0.113.9, 10.1.1.1", PROXIES, "203.0.113.9"),  # two proxies
        ("10.0.0.5", "10.2.2.2, 10.1.1.1", PROXIES, "10.2.2.2"),  # all proxies: the leftmost
        ("10.0.0.5", "garbage, 10.1.1.1", PROXIES, "10.1.1.1"),
        ("::1", "[2001:db8::1]:443", PROXIES, "2001:db8::1"),
        ("::ffff:198.51.100.7", None, (), "198.51.100.7"),
        (None, "1.2.3.4", PROXIES, None),
    ],
)
def test_client_address(remote, xff, proxies, expected):
    assert client_address(remote, xff, proxies) == expected


def test_a_bad_trusted_proxy_setting_names_the_entry():
    with pytest.raises(ValueError, match="not-an-ip"):
        parse_networks(("10.0.0.0/8", "not-an-ip"))


def _login(username: str, password: str, **extra):
    return APIClient().post(
        "/api/v1/auth/login", {"username": username, "password": password}, format="json", **extra
    )


@pytest.fixture
def login_rate(monkeypatch):
    cache.clear()
    monkeypatch.setitem(ScopedRateThrottle.THROTTLE_RATES, "login", "3/min")
    yield
    cache.clear()


def test_a_forged_forwarded_for_does_not_escape_the_throttle(world, login_rate):
    codes = [
        _login(
            "alpha-owner", "guess", REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR=f"10.9.9.{i}"
        ).status_code
        for i in range(4)
    ]
    assert codes == [400, 400, 400, 429]


@override_settings(SLUICE_TRUSTED_PROXIES=["10.0.0.1"])
def test_behind_a_trusted_proxy_each_client_has_its_own_budget(world, login_rate):
    def via_proxy(client: str, forged: str = ""):
        xff = f"{forged}, {client}" if forged else client
        return _login(
            "alpha-owner", "guess", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=xff
        ).status_code

    # a forged entry before the proxy's own is not the key: one budget for 203.0.113.1
    assert [via_proxy("203.0.113.1", forged=f"1.1.1.{i}") for i in range(4)] == [
        400,
        400,
        400,
        429,
    ]
    assert via_proxy("203.0.113.2") == 400  # another client of the proxy


@override_settings(SLUICE_LOGIN_LOCKOUT_AFTER=3, SLUICE_LOGIN_LOCKOUT_S=30)
@pytest.mark.parametrize("username", ["alpha-owner", "no-such-person"])
def test_a_username_is_locked_after_repeated_failures(world, username):
    cache.clear()
    answers = [_login(username, f"guess-{i}", REMOTE_ADDR=f"198.51.100.{i}") for i in range(3)]
    assert [a.status_code for a in answers] == [400, 400, 400]
    locked = _login(username, "pw-alpha", REMOTE_ADDR="203.0.113.50")  # even the right one
    assert locked.status_code == 429, locked.content
    assert locked.json()["error_code"] == "THROTTLED"
    assert 25 <= int(locked["Retry-After"]) <= 30
    assert set(locked.json()) == {"error_code", "message"}

    LoginFailure.objects.filter(username=username).update(
        locked_until=timezone.now() - timedelta(seconds=1)
    )
    after = _login(username, "pw-alpha", REMOTE_ADDR="203.0.113.50")
    if username == "alpha-owner":
        assert after.status_code == 200, after.content
        assert not LoginFailure.objects.filter(username=username).exists()
    else:
        assert after.status_code == 400
        # the next failure past the threshold locks for twice as long
        assert int(_login(username, "x", REMOTE_ADDR="203.0.113.51")["Retry-After"]) > 30
    cache.clear()


@override_settings(
    SLUICE_LOGIN_LOCKOUT_AFTER=5, SLUICE_LOGIN_LOCKOUT_S=30, SLUICE_LOGIN_LOCKOUT_MAX_S=900
)
def test_the_back_off_doubles_up_to_its_cap():
    assert [lockout.lock_seconds(n) for n in range(4, 12)] == [
        0,
        30,
        60,
        120,
        240,
        480,
        900,
        900,
    ]
    assert lockout.lock_seconds(10_000) == 900
