"""The CLI's pure helpers: argument parsing, timestamps, record formatting, error text."""

from __future__ import annotations

import json

import pytest

from brokernodes.cli import (
    UsageError,
    build_parser,
    describe_error,
    format_record,
    parse_timestamp,
)
from brokernodes.cli_common import producer_config
from brokernodes.client.consumer import ConsumerRecord
from brokernodes.errors import BrokerConnectionError, BrokerError


def test_parse_timestamp_accepts_epoch_ms_and_iso_8601():
    assert parse_timestamp("1732363200000") == 1732363200000
    assert parse_timestamp("2024-11-23T12:00:00Z") == 1732363200000
    assert parse_timestamp("2024-11-23T13:00:00+01:00") == 1732363200000
    assert parse_timestamp("2024-11-23T12:00:00") == 1732363200000  # naive = UTC
    with pytest.raises(UsageError, match="ISO 8601"):
        parse_timestamp("yesterday")


RECORD = ConsumerRecord("t", 1, 42, 1000, b"k", b"v\xff", [("h", b"x"), ("n", None)])


def test_format_record_text_and_json():
    assert format_record(RECORD, "text", False) == b"v\xff\n"
    assert format_record(RECORD, "text", True) == b"k\tv\xff\n"
    doc = json.loads(format_record(RECORD, "json", False))
    assert doc == {
        "topic": "t",
        "partition": 1,
        "offset": 42,
        "timestamp": 1000,
        "key": "k",
        "value": "dv8=",
        "value_encoding": "base64",
        "headers": [{"name": "h", "value": "x"}, {"name": "n", "value": None}],
    }


def test_error_descriptions_are_one_actionable_line():
    unauthenticated = BrokerError("UNAUTHENTICATED", "unknown API key", status=401)
    assert describe_error(unauthenticated) == (
        "UNAUTHENTICATED: unknown API key (check --api-key / SLUICE_API_KEY)"
    )
    refused = BrokerConnectionError("cannot connect to http://h:1 (connection refused); check")
    assert describe_error(refused).startswith("cannot connect to http://h:1")


def test_parser_reads_connection_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("SLUICE_URL", "http://b:1")
    monkeypatch.setenv("SLUICE_API_KEY", "id.secret")
    args = build_parser().parse_args(["consume", "t", "--from-beginning", "--format", "json"])
    assert (args.url, args.api_key, args.topics, args.format) == (
        "http://b:1",
        "id.secret",
        ["t"],
        "json",
    )
    e2e = build_parser().parse_args(["bench", "e2e", "t"])
    # e2e defaults to the SDK's lowest-latency settings
    assert e2e.rate == 10_000 and e2e.linger_ms == 0 and e2e.fetch_mode == "websocket"
    assert e2e.produce_mode == "websocket"
    assert build_parser().parse_args(["bench", "consume", "t"]).fetch_mode == "long_poll"
    assert build_parser().parse_args(["produce", "t"]).produce_mode == "http"


def test_websocket_produce_with_acks_zero_is_a_usage_error():
    args = build_parser().parse_args(["produce", "t", "--acks", "0", "--produce-mode", "websocket"])
    with pytest.raises(UsageError, match="--acks 1 or all"):
        producer_config(args)


def test_help_mentions_that_topic_creation_comes_with_the_control_plane(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["topics", "--help"])
    assert "control plane" in capsys.readouterr().out


def test_help_never_shows_the_api_key(monkeypatch, capsys):
    monkeypatch.setenv("SLUICE_API_KEY", "id.very-secret")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "very-secret" not in capsys.readouterr().out
