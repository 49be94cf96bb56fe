"""The ``sluice`` CLI for daily use against real brokers: ``topics describe`` asks each
partition's leader for its offsets and shows ISR and overridden configs; counts read right in
the singular; a ``--url`` that is some other HTTP server is named as such; the output in a
pipe stays plain (no progress line, no colour codes)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.integration.client.test_cli import sluice
from tests.integration.conftest import free_port
from tests.integration.groups.conftest import http_json, start_cluster


@pytest.fixture
def not_a_broker() -> Iterator[str]:
    """A plain static-file HTTP server on loopback: answers, but is no broker."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=1).close()
                break
            time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_describe_asks_each_leader_and_shows_isr(broker_factory):
    topics = {"spread": (3, {"retention.ms": "3600000"})}
    cluster = start_cluster(broker_factory, topics)
    first = cluster[0]
    for partition, count in ((0, 2), (1, 3), (2, 5)):  # each led by a different broker
        done = sluice(
            first, "produce", "spread", "--partition", str(partition), stdin=b"x\n" * count
        )
        assert done.returncode == 0, done.stderr
    out = sluice(first, "topics", "describe", "spread", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["configs"] == {"retention.ms": "3600000"}
    rows = {p["partition"]: p for p in doc["partitions"]}
    # broker 1's own metadata has no offsets for the partitions it does not lead
    _, meta = http_json("GET", first.url + "/sluice/v1/metadata", key=first.api_key)
    own = {p["partition"]: p["high_watermark"] for p in meta["topics"][0]["partitions"]}
    assert own[0] == 2 and own[1] is None and own[2] is None, own
    assert {p: rows[p]["high_watermark"] for p in rows} == {0: 2, 1: 3, 2: 5}
    assert {p: rows[p]["log_start_offset"] for p in rows} == {0: 0, 1: 0, 2: 0}
    assert {p: rows[p]["leader_url"] for p in rows} == {i: cluster[i].url for i in range(3)}
    for p in rows.values():
        assert p["isr"] and set(p["isr"]) <= set(p["replicas"]) and "error" not in p

    table = sluice(first, "topics", "describe", "spread")
    text = table.stdout.decode()
    assert table.returncode == 0 and "isr" in text and "high watermark" in text
    assert "configs overridden: retention.ms=3600000" in text
    assert "\x1b[" not in text, "no terminal codes in a pipe"

    # a leader that does not answer costs its own row only
    cluster[1].kill()
    down = sluice(first, "topics", "describe", "spread", "--format", "json")
    assert down.returncode == 0, down.stderr
    rows = {p["partition"]: p for p in json.loads(down.stdout)["partitions"]}
    assert rows[0]["high_watermark"] == 2 and rows[2]["high_watermark"] == 5
    assert rows[1]["high_watermark"] is None and cluster[1].url in rows[1]["error"]
    table = sluice(first, "topics", "describe", "spread")
    assert "partition 1: " in table.stdout.decode() and table.returncode == 0


def test_describe_of_a_topic_without_overrides_says_so(client_broker):
    out = sluice(client_broker, "topics", "describe", "cli-json")
    assert out.returncode == 0, out.stderr
    assert b"configs overridden: none" in out.stdout


def test_counts_are_singular_and_plural_and_the_pipe_stays_plain(client_broker):
    one = sluice(client_broker, "produce", "cli-ts", stdin=b"only\n")
    assert one.returncode == 0 and one.stderr == b"produced 1 record to cli-ts\n"
    two = sluice(client_broker, "produce", "cli-ts", stdin=b"a\nb\n")
    assert two.stderr == b"produced 2 records to cli-ts\n"
    out = sluice(client_broker, "consume", "cli-ts", "--format", "json", "--timeout", "10s")
    assert out.returncode == 0 and out.stderr == b""
    values = [json.loads(line)["value"] for line in out.stdout.splitlines()]
    assert values[-3:] == ["only", "a", "b"]


def test_a_url_that_is_not_a_broker_is_named(not_a_broker):
    out = sluice(None, "--url", not_a_broker, "topics", "list")
    assert out.returncode == 1
    message = out.stderr.decode()
    assert f"{not_a_broker} answers HTTP but is not a Sluice broker" in message, message
    assert "such as http://127.0.0.1:9092" in message and "Traceback" not in message


def test_progress_line_is_drawn_on_a_terminal_stderr_only(client_broker, tmp_path):
    done = sluice(client_broker, "produce", "cli-bench", stdin=b"p\n" * 3000)
    assert done.returncode == 0, done.stderr
    controller, terminal = pty.openpty()
    out_path = tmp_path / "records.txt"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brokernodes.cli", "consume", "cli-bench", "-n", "3000"],
            stdout=out,
            stderr=terminal,
            env={
                **os.environ,
                "SLUICE_URL": client_broker.url,
                "SLUICE_API_KEY": client_broker.api_key,
                "TERM": "xterm",
            },
        )
        os.close(terminal)
        drawn = b""
        with contextlib.suppress(OSError):  # EIO once the process has closed the terminal
            while chunk := os.read(controller, 4096):
                drawn += chunk
        proc.wait(timeout=60)
    os.close(controller)
    assert proc.returncode == 0, drawn
    assert len(out_path.read_bytes().splitlines()) == 3000  # the records file stays plain
    assert b"consume cli-bench" in drawn and b"records" in drawn, drawn


def test_consume_reads_several_topics_without_a_group(client_broker):
    for topic, values in (("cli-json", b"j1\n"), ("cli-text", b"t1\n")):
        assert sluice(client_broker, "produce", topic, stdin=values).returncode == 0
    out = sluice(client_broker, "consume", "cli-json", "cli-text", "--format", "json")
    assert out.returncode == 0, out.stderr
    seen = {(r["topic"], r["value"]) for r in map(json.loads, out.stdout.splitlines())}
    assert {("cli-json", "j1"), ("cli-text", "t1")} <= seen
    both = sluice(client_broker, "consume", "cli-json", "cli-text", "--partition", "0")
    assert both.returncode == 2 and b"--partition needs a single topic" in both.stderr
