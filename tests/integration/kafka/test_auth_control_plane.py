"""Authentication, ACLs and tenancy on the Kafka listener of control-plane brokers, with
confluent-kafka and kafka-python: a wrong secret fails clearly, a service account's role and
ACLs decide what it may do (TOPIC_/CLUSTER_AUTHORIZATION_FAILED), one organisation never sees
another's topics, configs or ACLs, and a revoked key's connections are closed."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.kafka.cp_kafka import (
    Tenant,
    eventually,
    kafka_control_plane,
    new_tenant,
    service_account_key,
)

T = 20


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("kafka-auth"), brokers=1) as cp:
        yield cp


@pytest.fixture(scope="module")
def acme(cp) -> Tenant:
    tenant = new_tenant(cp, "acme")
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    for future in admin.create_topics(
        [NewTopic("payments", 1, 1), NewTopic("ledger", 1, 1)], request_timeout=T
    ).values():
        future.result(T)
    return tenant


def produce_error(config: dict, topic: str) -> KafkaError | None:
    """Produce one record; the delivery error (None: delivered)."""
    producer = Producer({**config, "message.timeout.ms": 8000})
    results: list = []
    producer.produce(topic, b"v", on_delivery=lambda e, m: results.append(e))
    producer.flush(T)
    assert results, "no delivery report"
    return results[0]


def consume_error(config: dict, topic: str) -> KafkaError | None:
    """Read partition 0 from the start; the first error polled (None: a record came)."""
    consumer = Consumer(
        {**config, "group.id": f"g-{time.monotonic_ns()}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                return m.error()
            if not m.error():
                return None
        raise AssertionError("neither a record nor an error within 10 s")
    finally:
        consumer.close()


def test_wrong_secret_fails_clearly(cp, acme, caplog):
    user = acme.key.split(".", 1)[0]
    bad = {**acme.confluent(cp.kafka_bootstrap), "sasl.password": "not-the-secret"}
    errors: list = []
    admin = AdminClient({**bad, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)
    eventually("an authentication error", lambda: (admin.poll(0.2), errors)[1], timeout=20)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("unknown or revoked API key" in e.str() for e in errors), errors

    # kafka-python gives up bootstrapping and logs Kafka's SASL error with the broker's words
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaProducer(
            **acme.kafka_python(
                cp.kafka_bootstrap, sasl_plain_password="not-the-secret", max_block_ms=15000
            )
        )
    failures = [
        r.getMessage() for r in caplog.records if "SaslAuthenticationFailed" in r.getMessage()
    ]
    assert failures and "unknown or revoked API key" in failures[0], caplog.text[-2000:]
    assert user.startswith("slk_")  # the SASL user name is the key id


def test_roles_and_acls_deny_with_kafka_codes(cp, acme):
    clerk = service_account_key(cp, acme.key, "clerk", "member")
    viewer = service_account_key(cp, acme.key, "viewer", "read-only")
    clerk_config = acme.confluent(cp.kafka_bootstrap, key=clerk)
    viewer_config = acme.confluent(cp.kafka_bootstrap, key=viewer)
    assert produce_error(acme.confluent(cp.kafka_bootstrap), "payments") is None
    assert produce_error(clerk_config, "payments") is None

    # the admin denies the clerk payments (through Kafka's CreateAcls)
    admin = AdminClient(acme.confluent(cp.kafka_bootstrap))
    denies = [
        AclBinding(
            ResourceType.TOPIC,
            "payments",
            ResourcePatternType.LITERAL,
            "User:clerk",
            "*",
            op,
            AclPermissionType.DENY,
        )
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    for future in admin.create_acls(denies, request_timeout=T).values():
        future.result(T)
    error = eventually(
        "the DENY to reach the broker", lambda: produce_error(clerk_config, "payments")
    )
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    error = eventually("the READ DENY too", lambda: consume_error(clerk_config, "payments"))
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(clerk_config, "ledger") is None  # other topics are the clerk's
    assert consume_error(clerk_config, "ledger") is None

    # a read-only service account reads but may not write, create topics or touch ACLs
    assert produce_error(viewer_config, "ledger").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert consume_error(viewer_config, "ledger") is None
    viewer_admin = AdminClient(viewer_config)
    created = viewer_admin.create_topics([NewTopic("mine", 1, 1)], request_timeout=T)["mine"]
    with pytest.raises(KafkaException) as raised:
        created.result(T)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a member (not an admin) may not manage ACLs: the control plane's role check
    grant = AclBinding(
        ResourceType.TOPIC,
        "payments",
        ResourcePatternType.LITERAL,
        "User:clerk",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    clerk_admin = AdminClient(clerk_config)
    created = clerk_admin.create_acls([grant], request_timeout=T)[grant]
    with pytest.raises(KafkaException) as raised:
        created.result(T)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert "admin" in raised.value.args[0].str()
    # (librdkafka drops DescribeAcls' top-level error: kafka-python shows it)
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    kp_admin = KafkaAdminClient(**acme.kafka_python(cp.kafka_bootstrap, key=clerk))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_admin.describe_acls(
                ACLFilter(
                    principal=None,
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(
                        KpResourceType.ANY, None, ACLResourcePatternType.ANY
                    ),
                )
            )
    finally:
        kp_admin.close()


def test_tenants_are_isolated(cp, acme):
    bravo = new_tenant(cp, "bravo")
    admin = AdminClient(bravo.confluent(cp.kafka_bootstrap))
    topics = admin.list_topics(timeout=T).topics
    assert "payments" not in topics and "ledger" not in topics
    assert not any(t.startswith("__") for t in topics)

    # acme's topic is unknown to bravo, in Metadata and DescribeConfigs
    named = admin.list_topics("payments", timeout=T).topics["payments"]
    assert named.error is not None and named.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    resource = ConfigResource(ResourceType.TOPIC, "payments")
    with pytest.raises(KafkaException) as raised:
        admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # bravo's own "payments" is another topic; its ACLs are bravo's only
    assert admin.create_topics([NewTopic("payments", 2, 1)])["payments"].result(T) is None
    assert len(admin.list_topics("payments", timeout=T).topics["payments"].partitions) == 2
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(everything, request_timeout=T).result(T) == []
    acme_admin = AdminClient(acme.confluent(cp.kafka_bootstrap))
    acme_topics = acme_admin.list_topics("payments", timeout=T).topics
    assert len(acme_topics["payments"].partitions) == 1


def test_revoked_key_connection_is_closed(cp, acme):
    key = service_account_key(cp, acme.key, "leaver", "member")
    errors: list = []
    producer = Producer({**acme.confluent(cp.kafka_bootstrap, key=key), "error_cb": errors.append})
    delivered: list = []
    producer.produce("ledger", b"before", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(T) == 0 and delivered == [None]

    key_id = key.split(".", 1)[0].removeprefix("slk_")
    assert cp.api("DELETE", f"api-keys/{key_id}", key=acme.key)[0] == 204
    broker = cp.brokers[0]
    eventually(
        "the broker to close the revoked key's connection",
        lambda: "API key revoked" in broker.output(),
        timeout=10,
    )
    # librdkafka reconnects and is refused
    producer.poll(0)
    eventually(
        "an authentication error",
        lambda: (
            producer.poll(0.2),
            any(e.code() == KafkaError._AUTHENTICATION for e in errors),
        )[1],
        timeout=15,
    )
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
