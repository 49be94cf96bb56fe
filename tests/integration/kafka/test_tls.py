"""SASL_SSL: a broker started with ``--kafka-tls-cert/--kafka-tls-key`` (a self-signed
certificate made here for 127.0.0.1) serves confluent-kafka and kafka-python over TLS.
Records fetched over TLS go through the copying path (sendfile would bypass the TLS layer),
so the bytes each client reads back must be exactly those produced; plaintext clients and
wrong secrets fail cleanly."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

TIMEOUT_S = 30.0


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sluice-test-broker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    """One broker with a TLS Kafka listener, and the CA file clients trust."""
    base = tmp_path_factory.mktemp("kafka-tls")
    cert, key = make_certificate(base)
    launcher = BrokerLauncher(base)
    try:
        broker = launcher(
            kafka=True,
            topics={"secure": (2, {}), "secure-kp": (1, {})},
            extra_args=["--kafka-tls-cert", str(cert), "--kafka-tls-key", str(key)],
        )
        yield broker, cert
    finally:
        launcher.close()


def _confluent(broker: BrokerProcess, ca: Path, **extra) -> dict:
    return confluent_config(
        broker.bootstrap, **{"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca)}, **extra
    )


def _kafka_python(broker: BrokerProcess, ca: Path, **extra) -> dict:
    return kafka_python_config(
        broker.bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(ca),
        ssl_check_hostname=True,
        **extra,
    )


def _values(n: int, size: int) -> list[bytes]:
    return [(f"{i:06d}".encode() * (size // 6 + 1))[:size] for i in range(n)]


def test_confluent_kafka_produces_and_fetches_over_tls(tls):
    broker, ca = tls
    values = _values(300, 10_000)  # ~3 MB over two partitions: many copy-path chunks
    producer = Producer(_confluent(broker, ca, **{"linger.ms": 5}))
    errors: list = []
    for i, v in enumerate(values):
        producer.produce(
            "secure", value=v, key=str(i).encode(), on_delivery=lambda e, _m: errors.append(e)
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None] * len(values)

    consumer = Consumer(
        _confluent(broker, ca, **{"group.id": "tls-c", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition("secure", p, 0) for p in (0, 1)])
        got: dict[bytes, bytes] = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[m.key()] = m.value()
    finally:
        consumer.close()
    assert got == {str(i).encode(): v for i, v in enumerate(values)}


def test_kafka_python_produces_and_fetches_over_tls(tls):
    broker, ca = tls
    values = _values(50, 40_000)
    producer = KafkaProducer(**_kafka_python(broker, ca))
    try:
        for v in values:
            producer.send("secure-kp", value=v, partition=0).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(**_kafka_python(broker, ca, consumer_timeout_ms=5000))
    try:
        consumer.assign([KTP("secure-kp", 0)])
        consumer.seek(KTP("secure-kp", 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert got == values


def test_wrong_secret_over_tls_fails_with_the_brokers_message(tls):
    broker, ca = tls
    failures: list = []
    producer = Producer(
        _confluent(
            broker,
            ca,
            **{"sasl.password": "wrong", "error_cb": failures.append, "log_level": 0},
        )
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not failures and time.monotonic() < deadline:
        producer.poll(0.2)
    assert failures, "no error reported"
    assert failures[0].code() == KafkaError._AUTHENTICATION
    assert "API key" in failures[0].str()


def test_a_plaintext_client_on_the_tls_port_is_closed(tls):
    broker, _ = tls
    frame = struct.pack(">hhi", 18, 0, 1) + b"\x00\x01x"
    with socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        sock.settimeout(10)
        data = b""
        while chunk := sock.recv(4096):  # whatever TLS alert comes back, then EOF
            data += chunk
        assert not data.startswith(struct.pack(">i", len(data) - 4))  # no Kafka answer


def test_a_client_that_does_not_trust_the_certificate_fails(tls):
    broker, _ = tls
    context = ssl.create_default_context()  # the system CAs, not ours
    with (
        socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(sock, server_hostname="127.0.0.1")


def test_a_stalled_tls_handshake_is_cut_off(tmp_path):
    cert, key = make_certificate(tmp_path)
    launcher = BrokerLauncher(tmp_path)
    try:
        broker = launcher(
            kafka=True,
            extra_args=[
                "--kafka-tls-cert",
                str(cert),
                "--kafka-tls-key",
                str(key),
                "--request-head-timeout-ms",
                "1000",
            ],
        )
        with socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10) as sock:
            started = time.monotonic()
            assert sock.recv(1) == b""  # never sent a ClientHello: closed
            assert time.monotonic() - started < 8
    finally:
        launcher.close()


def test_tls_flags_are_checked_at_start(tmp_path):
    from brokernodes.server.config import parse_args

    cert, key = make_certificate(tmp_path)
    base = ["--config", "m.json", "--data-dir", str(tmp_path), "--port", "1"]
    config = parse_args(
        [*base, "--kafka-port", "9092", "--kafka-tls-cert", str(cert), "--kafka-tls-key", str(key)]
    )
    assert (config.kafka_tls_cert, config.kafka_tls_key) == (str(cert), str(key))
    for bad in (
        ["--kafka-port", "9092", "--kafka-tls-cert", str(cert)],  # no key
        ["--kafka-tls-cert", str(cert), "--kafka-tls-key", str(key)],  # no listener
        ["--kafka-port", "9092", "--kafka-tls-cert", "nope.pem", "--kafka-tls-key", str(key)],
    ):
        with pytest.raises(SystemExit):
            parse_args([*base, *bad])
