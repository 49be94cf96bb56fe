"""The one redaction filter of the brokers and the control plane: credentials in messages,
arguments, tracebacks and stack info are replaced, wherever in the text they sit."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from brokernodes.security.redaction import FILTER, RedactSecretsFilter, install, redact

KEY_ID = "AbCdEfGhIjKlMnOp"
SECRET = "s3cr3t-Zz_0123456789abcdefghijklmnopqrstuvwx"
KEY = f"slk_{KEY_ID}.{SECRET}"
STATIC = "sk_test.static-secret-value"


@pytest.mark.parametrize(
    "text",
    [
        f"token {KEY}",
        f"Authorization: Bearer {KEY}\x00",
        repr({"Authorization": f"Bearer {KEY}\x00"}),
        f"Client protocols {[KEY]!r} don't overlap",
        f"GET /sluice/v1/metadata?api_key={KEY}&x=1",
        f"GET /x?api_key=slk_{KEY_ID}%2E{SECRET}",
        f"Bad header: b'X-Api-Key: {KEY}\\x00'",
    ],
)
def test_a_sluice_key_keeps_its_id_and_loses_its_secret(text):
    clean = redact(text)
    assert SECRET not in clean and SECRET[:20] not in clean
    assert f"slk_{KEY_ID}" in clean


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"Authorization: Bearer {STATIC}", "static-secret"),
        (f"authorization: bearer {STATIC}", "static-secret"),
        (repr([(b"authorization", f"Bearer {STATIC}".encode())]), "static-secret"),
        (repr({"authorization": f"Bearer {STATIC}"}), "static-secret"),
        ("Authorization: Cluster the-cluster-secret", "the-cluster-secret"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpw"),
        ("Cookie: sessionid=abc123sessionvalue; csrftoken=xyz", "abc123sessionvalue"),
        ("Set-Cookie: sessionid=abc123sessionvalue; Path=/", "abc123sessionvalue"),
        ('{"username": "bob", "password": "hunter2-long"}', "hunter2-long"),
        ("{'password': 'hunter2-long'}", "hunter2-long"),
        ("username=bob&password=hunter2-long&next=/", "hunter2-long"),
        (f"GET /x?token={STATIC}", "static-secret"),
        (f"GET /x?access_token={STATIC}", "static-secret"),
        ("sessionid=abc123sessionvalue", "abc123sessionvalue"),
    ],
)
def test_other_credentials_are_redacted(text, secret):
    clean = redact(text)
    assert secret not in clean, clean
    assert "[REDACTED]" in clean


@pytest.mark.parametrize(
    "text",
    ["Cluster metadata refreshed (epoch 3)", "produced 10 records to orders-0", "plain line"],
)
def test_ordinary_lines_are_left_alone(text):
    assert redact(text) == text


def test_the_filter_rewrites_arguments_tracebacks_and_stack_info():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "header %s", (KEY,), None)
    assert RedactSecretsFilter().filter(record)
    assert SECRET not in record.getMessage() and f"slk_{KEY_ID}" in record.getMessage()
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), exc_info)
    record.stack_info = f"Stack: password={SECRET}"
    RedactSecretsFilter().filter(record)
    out = logging.Formatter().format(record)
    assert SECRET not in out and "ValueError" in out


def test_install_covers_the_root_and_non_propagating_handlers():
    root_stream, own_stream = io.StringIO(), io.StringIO()
    root_handler = logging.StreamHandler(root_stream)
    own = logging.getLogger("test.redaction.own")
    own_handler = logging.StreamHandler(own_stream)
    own.addHandler(own_handler)
    own.propagate = False
    logging.getLogger().addHandler(root_handler)
    try:
        install()
        install()  # idempotent
        assert own_handler.filters.count(FILTER) == 1
        logging.getLogger("test.redaction.other").warning("key %s", KEY)
        own.warning("Authorization: Bearer %s", STATIC)
    finally:
        logging.getLogger().removeHandler(root_handler)
        own.removeHandler(own_handler)
    assert SECRET not in root_stream.getvalue() and f"slk_{KEY_ID}" in root_stream.getvalue()
    assert "static-secret" not in own_stream.getvalue()


def test_a_secret_on_its_own_is_redacted_but_ordinary_tokens_are_not():
    assert redact(f"secret {SECRET[:43]} seen") == "secret [REDACTED] seen"
    sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    for text in (sha256, "a" * 43, "orders-2024-01-01-eu-west-1-clickstream-raw"):
        assert redact(text) == text


def test_redaction_stays_linear_on_hostile_lines():
    import time

    for line in ("A1b" * 300_000, "bearer " * 100_000, "authorization: " * 50_000):
        started = time.perf_counter()
        redact(line)
        assert time.perf_counter() - started < 2.0
