"""Broker.authorize reuses decisions made against the current global metadata image, and a
new image (an ACL added, a key revoked) takes effect at the very next request, as a Kafka
connection that stays open needs; refusals are never kept; the tenant is set on every
request, from the cache too."""

from __future__ import annotations

import contextvars

import pytest

from brokernodes.errors import TopicAuthorizationFailedError, UnauthenticatedError
from brokernodes.server.auth import current_client_host
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import current_tenant
from brokernodes.server.metadata.image import build_image
from tests.unit.server.test_metadata_log_client import acl, key, topic
from tests.unit.server.test_quota_handlers import TenantMetadata

ORG = "org-a"
HEADER = "Bearer slk_a.secret-a"


def _state(*extra: tuple) -> dict:
    state = {
        ("broker", "1"): {"id": 1, "url": "http://127.0.0.1:1"},
        ("topic", "t-a"): topic("t-a", ORG, "orders"),
        ("api_key", "slk_a"): key("slk_a", ORG, "secret-a", "User:app"),
    }
    state.update(extra)
    return state


def _image(state: dict, version: int):
    return build_image(state, cluster_id="c", broker_id=1, version=version)


def _broker(tmp_path) -> tuple[Broker, TenantMetadata]:
    metadata = TenantMetadata(_image(_state(), 1))
    config = BrokerConfig("", str(tmp_path / "data"), 0, fsync=False)
    return Broker(config, metadata), metadata


def _write(broker: Broker, host: str | None = None):
    """One request's authorization in a fresh context (as each connection task has)."""

    def call():
        current_client_host.set(host)
        principal = broker.authorize(HEADER, "WRITE", "topic", "orders")
        return principal, current_tenant.get()

    return contextvars.copy_context().run(call)


def test_decisions_are_reused_until_the_image_changes(tmp_path):
    broker, metadata = _broker(tmp_path)
    first, tenant = _write(broker)
    assert (first.name, tenant) == ("User:app", ORG)
    again, tenant = _write(broker)
    assert again is first and tenant == ORG  # from the cache, the tenant set all the same
    assert len(broker._decisions.decisions) == 1

    # an ACL denying the write: the next request is refused, on the same broker
    deny = acl(ORG, "User:app", "orders", "WRITE", "DENY")
    metadata._image = build_image(
        _state((("acl", "x"), deny)), cluster_id="c", broker_id=1, version=2
    )
    with pytest.raises(TopicAuthorizationFailedError):
        _write(broker)
    with pytest.raises(TopicAuthorizationFailedError):
        _write(broker)  # refusals are not cached: decided afresh, refused again
    assert broker._decisions.decisions == {}

    # the key revoked: unauthenticated at the next request
    state = _state()
    del state[("api_key", "slk_a")]
    metadata._image = _image(state, 3)
    with pytest.raises(UnauthenticatedError):
        _write(broker)


def test_the_client_address_is_part_of_the_decision(tmp_path):
    broker, metadata = _broker(tmp_path)
    deny = acl(ORG, "User:app", "orders", "WRITE", "DENY", host="10.0.0.2")
    metadata._image = build_image(
        _state((("acl", "y"), deny)), cluster_id="c", broker_id=1, version=2
    )
    assert _write(broker, "10.0.0.1")[0].name == "User:app"
    with pytest.raises(TopicAuthorizationFailedError):
        _write(broker, "10.0.0.2")  # not answered from 10.0.0.1's decision
