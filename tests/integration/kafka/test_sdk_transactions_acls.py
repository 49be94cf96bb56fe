"""The transaction routes of Sluice's own API under the control plane's roles: a read-only
service account's key may use no transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
from the routes and from the SDK's ``init_transactions``), a member's may, and the id is
scoped to its organisation as on the Kafka listener."""

from __future__ import annotations

import uuid

import pytest

from brokernodes.client.transactional import TransactionalProducer
from brokernodes.errors import BrokerError
from tests.integration.kafka.cp_kafka import (
    eventually,
    kafka_control_plane,
    new_tenant,
    service_account_key,
)
from tests.integration.kafka.test_sdk_transactions import call

T = 30


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("sdk-txn-acls"), brokers=1) as cp:
        yield cp


def test_a_read_only_key_cannot_use_a_transactional_id(cp):
    tenant = new_tenant(cp, f"sdktx{uuid.uuid4().hex[:4]}")
    reader = service_account_key(cp, tenant.key, "auditor", "read-only")
    member = service_account_key(cp, tenant.key, "payer", "member")
    url = cp.brokers[0].url
    init = "/sluice/v1/transactions/ledger-1/init"
    # both keys reach the broker with the metadata log: wait for each to authenticate
    eventually("the keys to reach the broker", lambda: call(url, init, {}, key=reader)[0] != 401)
    status, doc = call(url, init, {}, key=reader)
    assert (status, doc["error_code"]) == (403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), doc
    first = eventually("the member's key", lambda: _ok(call(url, init, {}, key=member)))
    assert first["producer_epoch"] == 0, first
    with (
        TransactionalProducer(url, reader, transactional_id="ledger-2") as p,
        pytest.raises(BrokerError) as e,
    ):
        p.init_transactions(T)
    assert e.value.error_code == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    # another organisation's producer with the same id starts its own epochs
    other = new_tenant(cp, f"sdktxo{uuid.uuid4().hex[:4]}")
    theirs = eventually("the other key", lambda: _ok(call(url, init, {}, key=other.key)))
    assert theirs["producer_epoch"] == 0, theirs
    status, doc = call(url, init, {}, key=member)
    assert status == 200 and doc["producer_epoch"] == 1, doc


def _ok(answer: tuple[int, dict]) -> dict | None:
    status, doc = answer
    return doc if status == 200 else None
