"""The ``sluice`` command line against a real broker, run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.conftest import free_port


def sluice(broker, *args: str, stdin: bytes = b"", env: dict | None = None, timeout: float = 30):
    environment = {
        **os.environ,
        "SLUICE_URL": broker.url if broker else "",
        "SLUICE_API_KEY": broker.api_key if broker else "",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "brokernodes.cli", *args],
        input=stdin,
        capture_output=True,
        env=environment,
        timeout=timeout,
        check=False,
    )


def test_produce_lines_then_consume_them_as_text(client_broker):
    lines = b"".join(b"k%d:line %d\n" % (i % 5, i) for i in range(30))
    done = sluice(
        client_broker,
        "produce",
        "cli-text",
        "--key-separator",
        ":",
        "--header",
        "src=cli",
        stdin=lines,
    )
    assert done.returncode == 0, done.stderr
    assert b"produced 30 records to cli-text" in done.stderr

    out = sluice(client_broker, "consume", "cli-text", "--from-beginning", "--print-key")
    assert out.returncode == 0, out.stderr
    got = out.stdout.decode().splitlines()
    assert sorted(got) == sorted(f"k{i % 5}\tline {i}" for i in range(30))

    first = sluice(client_broker, "consume", "cli-text", "--partition", "0", "-n", "2")
    assert first.returncode == 0 and len(first.stdout.splitlines()) == 2


def test_consume_as_json_from_an_offset_and_a_timestamp(client_broker):
    done = sluice(client_broker, "produce", "cli-json", "--acks", "all", stdin=b"a\nb\n\xff\xfe\n")
    assert done.returncode == 0, done.stderr

    out = sluice(client_broker, "consume", "cli-json", "--format", "json")
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["value"] for r in records] == ["a", "b", "//4="]
    assert records[2]["value_encoding"] == "base64"
    assert records[0]["key"] is None and records[0]["topic"] == "cli-json"
    assert [r["offset"] for r in records] == [0, 1, 2]

    out = sluice(client_broker, "consume", "cli-json", "--offset", "1", "--format", "json")
    assert [json.loads(line)["offset"] for line in out.stdout.splitlines()] == [1, 2]

    future = sluice(client_broker, "consume", "cli-json", "--timestamp", "2999-01-01T00:00:00Z")
    assert future.returncode == 0 and future.stdout == b""
    past = sluice(client_broker, "consume", "cli-json", "--timestamp", "0")
    assert len(past.stdout.splitlines()) == 3


def test_consume_follow_stops_at_max_records(client_broker):
    env = {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "brokernodes.cli", "consume", "cli-ts", "--follow", "-n", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            **os.environ,
            **env,
            "SLUICE_URL": client_broker.url,
            "SLUICE_API_KEY": client_broker.api_key,
        },
    )
    try:
        import time

        time.sleep(1.5)  # the follower starts at the end; produce after it is there
        done = sluice(client_broker, "produce", "cli-ts", stdin=b"one\ntwo\nthree\n")
        assert done.returncode == 0, done.stderr
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert stdout.splitlines() == [b"one", b"two"]


def test_topics_list_and_describe(client_broker):
    out = sluice(client_broker, "topics", "list", "--format", "json")
    topics = {t["name"]: t["partitions"] for t in json.loads(out.stdout)}
    assert topics["keyed"] == 4
    out = sluice(client_broker, "topics", "describe", "cli-text", "--format", "json")
    doc = json.loads(out.stdout)
    assert [p["partition"] for p in doc["partitions"]] == [0, 1]
    assert doc["partitions"][0]["leader_url"] == client_broker.url
    table = sluice(client_broker, "topics", "list")
    assert table.returncode == 0 and b"cli-text" in table.stdout
    missing = sluice(client_broker, "topics", "describe", "nope")
    assert missing.returncode == 1
    assert b"UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr and b"nope" in missing.stderr


def test_bench_produce_consume_and_e2e_print_summaries(client_broker):
    out = sluice(
        client_broker, "bench", "produce", "cli-bench", "--count", "20000", "--format", "json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["records"] == 20000 and result["failed"] == 0 and result["records_per_s"] > 0
    out = sluice(client_broker, "bench", "consume", "cli-bench", "--count", "20000")
    assert out.returncode == 0, out.stderr
    assert b"records/s" in out.stdout and b"20,000" in out.stdout
    out = sluice(
        client_broker,
        "bench",
        "e2e",
        "cli-bench",
        "--rate",
        "2000",
        "--duration",
        "1",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["failed"] == 0 and result["latency_p99_ms"] is not None
    # the warm-up records (one per key, before the clock starts) are not counted
    assert result["records"] == result["sent"] > 0


def test_unreachable_url_says_which_url_and_what_to_check():
    url = f"http://127.0.0.1:{free_port()}"
    out = sluice(None, "--url", url, "consume", "anything")
    assert out.returncode == 1
    message = out.stderr.decode()
    assert url in message and "connection refused" in message and "SLUICE_URL" in message
    assert "Traceback" not in message


def test_bad_api_key_is_reported_without_printing_it(client_broker):
    secret = "sk_test.not-the-right-secret"
    out = sluice(client_broker, "topics", "list", env={"SLUICE_API_KEY": secret})
    assert out.returncode == 1
    message = out.stderr.decode()
    assert "UNAUTHENTICATED" in message and "SLUICE_API_KEY" in message
    assert secret not in message and "not-the-right-secret" not in message
    out = sluice(client_broker, "produce", "cli-text", stdin=b"x\n", env={"SLUICE_API_KEY": secret})
    assert out.returncode == 1 and b"UNAUTHENTICATED" in out.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["consume", "cli-text", "--timestamp", "yesterday"], "ISO 8601"),
        (["produce", "cli-text", "--header", "novalue"], "name=value"),
        (["consume", "cli-text", "--partition", "9"], "has 2 partitions"),
    ],
)
def test_usage_errors_are_explained(client_broker, args, text):
    out = sluice(client_broker, *args)
    assert out.returncode == 2
    assert text in out.stderr.decode()


def test_produce_reports_a_line_without_the_key_separator(client_broker):
    out = sluice(client_broker, "produce", "cli-text", "--key-separator", "=", stdin=b"a=1\nb2\n")
    assert out.returncode == 2
    assert "line 2 has no key separator" in out.stderr.decode()


def test_wrong_cluster_is_refused(client_broker):
    out = sluice(client_broker, "--cluster", "prod", "topics", "list")
    assert out.returncode == 1 and b"not 'prod'" in out.stderr
