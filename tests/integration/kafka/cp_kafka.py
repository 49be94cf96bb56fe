"""A control plane with Kafka-listening brokers for the admin, auth and tenancy tests, and
each tenant's client settings: SASL/PLAIN with the API key id (``slk_<id>``) as the user
name and the secret as the password."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.control_plane import ControlPlane, start_control_plane


def sasl(token: str) -> tuple[str, str]:
    """An API key token ``slk_<id>.<secret>`` as (SASL user name, password)."""
    user, _, secret = token.partition(".")
    return user, secret


@dataclass
class Tenant:
    slug: str
    key: str  # the admin service account's API key token
    service_account: str

    @property
    def principal(self) -> str:
        return f"User:{self.service_account}"

    def confluent(self, bootstrap: str, key: str | None = None, **extra) -> dict:
        user, secret = sasl(key or self.key)
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": secret,
            **extra,
        }

    def kafka_python(self, bootstrap: str, key: str | None = None, **extra) -> dict:
        user, secret = sasl(key or self.key)
        return {
            "bootstrap_servers": bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": secret,
            "request_timeout_ms": 20_000,
            **extra,
        }


def new_tenant(cp: ControlPlane, slug: str) -> Tenant:
    seed = cp.tenant(slug)
    return Tenant(slug, seed["api_key"], seed["service_account"])


def service_account_key(cp: ControlPlane, admin_key: str, name: str, role: str) -> str:
    """A new service account of ``role`` in the admin key's organisation; its API key."""
    status, sa = cp.api("POST", "service-accounts/", {"name": name, "role": role}, key=admin_key)
    assert status == 201, sa
    status, created = cp.api("POST", "api-keys/", {"service_account_id": sa["id"]}, key=admin_key)
    assert status == 201, created
    return created["key"]


@contextlib.contextmanager
def kafka_control_plane(tmp_path: Path, brokers: int = 2) -> Iterator[ControlPlane]:
    """A control plane and ``brokers`` brokers, each with a Kafka listener."""
    with start_control_plane(tmp_path) as cp:
        for b in range(1, brokers + 1):
            cp.start_broker(b, kafka=True)
        yield cp


def eventually(what: str, check: Callable[[], object], timeout: float = 20.0):
    """``check()`` until truthy (exceptions count as not yet); bounded."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
