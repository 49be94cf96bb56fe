"""The CLI's pure parts: durations, plurals, "did you mean", and telling a broker's metadata
answer from the control plane's."""

from __future__ import annotations

import pytest

from brokernodes.cli import build_parser
from brokernodes.cli_text import did_you_mean, format_duration, parse_duration, plural
from brokernodes.cli_url import classify


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("5min", 300.0),
        ("1h", 3600.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("2d", 172800.0),
        ("45", 45.0),
        (" 10 S ", 10.0),
    ],
)
def test_parse_duration_accepts_human_units(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "s", "-3s", "1h30m", "ten seconds"])
def test_parse_duration_refuses_what_it_cannot_read_and_says_how(text):
    with pytest.raises(ValueError, match="250ms, 30s, 5m, 1h"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "250 ms"),
        (0.0004, "0 ms"),
        (1, "1 s"),
        (12.34, "12.3 s"),
        (240, "4 min"),
        (250, "4 min 10 s"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
        (-2, "-2 s"),
    ],
)
def test_format_duration_uses_the_unit_a_person_would(seconds, text):
    assert format_duration(seconds) == text


def test_plural_forms():
    assert plural(1, "record") == "1 record"
    assert plural(0, "record") == "0 records"
    assert plural(2, "record") == "2 records"
    assert plural(12345, "record") == "12,345 records"
    assert plural(1, "partition") == "1 partition"
    assert plural(3, "entry", "entries") == "3 entries"


def test_did_you_mean_finds_close_words_only():
    commands = ["topics", "acls", "groups", "produce", "consume", "bench"]
    assert did_you_mean("prodce", commands) == "produce"
    assert did_you_mean("consme", commands) == "consume"
    assert did_you_mean("topic", commands) == "topics"
    assert did_you_mean("zzz", commands) is None


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_parser_suggests_the_command_action_and_flag(capsys):
    assert "(did you mean 'produce'?)" in _usage_error(capsys, ["prodce", "t"])
    assert "(did you mean 'describe'?)" in _usage_error(capsys, ["topics", "descibe", "t"])
    assert "(did you mean --format?)" in _usage_error(capsys, ["consume", "t", "--fromat", "json"])
    both = _usage_error(capsys, ["consume", "t", "--fromat", "json", "--gruop", "g"])
    assert "--format for --fromat" in both and "--group for --gruop" in both
    # flags are suggested from the subcommand given, not from another one
    reset = ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--excute"]
    assert "(did you mean --execute?)" in _usage_error(capsys, reset)
    assert "did you mean" not in _usage_error(capsys, ["qqqq"])


def test_parser_reads_durations_in_human_units(capsys):
    args = build_parser().parse_args(["consume", "t", "--timeout", "250ms"])
    assert args.timeout == pytest.approx(0.25)
    args = build_parser().parse_args(["bench", "produce", "t", "--duration", "5m"])
    assert args.duration == 300.0
    assert "not a duration" in _usage_error(capsys, ["consume", "t", "--timeout", "soon"])
    assert "longer than zero" in _usage_error(capsys, ["consume", "t", "--timeout", "0s"])


def test_classify_tells_a_broker_from_the_control_plane():
    broker = (200, "application/json", b'{"cluster_id": "c", "brokers": [], "topics": []}')
    html = (200, "text/html; charset=utf-8", b"<!doctype html><html>console</html>")
    api_401 = (401, "application/json", b'{"error_code": "UNAUTHENTICATED"}')
    assert classify(broker, None) == "broker"
    assert classify(html, api_401) == "control-plane"
    assert classify(html, (404, "text/html", b"")) == "other"
    assert classify(None, None) == "unreachable"
