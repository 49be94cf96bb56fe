"""``sluice consume --group`` against a real broker: two processes in the same group share the
partitions of two topics, every record is printed once across both, and what was printed is
committed (periodically, on Ctrl-C, at --max-records, at the end of the records)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.groups.conftest import GROUP_TOPICS, wait_for

TOPICS = ("sixty", "orders")  # 12 + 3 partitions
FOLLOW = ("--follow", "--timeout", "60s", "--format", "json", "--commit-interval", "1s", "--group")


def _env(broker) -> dict[str, str]:
    return {**os.environ, "SLUICE_URL": broker.url, "SLUICE_API_KEY": broker.api_key}


def sluice(broker, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "brokernodes.cli", *args],
        input=stdin,
        capture_output=True,
        env=_env(broker),
        timeout=60,
        check=False,
    )


def member(broker, group: str, out: Path) -> subprocess.Popen:
    """A ``--follow`` member writing to a file (a pipe nobody reads would fill and stall it)."""
    with out.open("wb") as stdout, out.with_suffix(".err").open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "brokernodes.cli", "consume", *TOPICS, *FOLLOW, group],
            stdout=stdout,
            stderr=stderr,
            env=_env(broker),
        )


def describe(broker, group: str) -> dict:
    done = sluice(broker, "groups", "describe", group, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def produce(broker, topic: str, values: list[str]) -> None:
    """Keyed by the value, so the records spread over every partition."""
    lines = "".join(f"{v}:{v}\n" for v in values).encode()
    done = sluice(broker, "produce", topic, "--key-separator", ":", stdin=lines)
    assert done.returncode == 0, done.stderr


def test_two_consumers_in_a_group_share_the_partitions_and_commit(broker_factory, tmp_path):
    broker = broker_factory(GROUP_TOPICS)
    group = "cli-shared"
    files = [tmp_path / "a.out", tmp_path / "b.out"]
    a, b = (member(broker, group, f) for f in files)
    try:

        def shared() -> bool:
            found = sluice(broker, "groups", "describe", group, "--format", "json")
            if b"GROUP_ID_NOT_FOUND" in found.stderr:
                return False  # no member has joined yet
            d = json.loads(found.stdout)
            owned = [{(x["topic"], x["partition"]) for x in m["assignments"]} for m in d["members"]]
            total = set().union(*owned) if owned else set()
            return len(owned) == 2 and all(owned) and len(total) == 15

        wait_for("both members to own partitions of both topics", shared, timeout=30)
        produce(broker, "sixty", [f"s{i}" for i in range(600)])
        produce(broker, "orders", [f"o{i}" for i in range(300)])

        def all_committed() -> bool:
            rows = describe(broker, group)["offsets"]
            ends = {(r["topic"], r["partition"]): r["log_end_offset"] for r in rows}
            # a partition no record went to may have nothing committed
            done = {(r["topic"], r["partition"]): r["committed_offset"] or 0 for r in rows}
            return len(rows) == 15 and sum(ends.values()) == 900 and done == ends

        wait_for("the group to commit every record", all_committed, timeout=30)
        for proc in (a, b):
            proc.send_signal(signal.SIGINT)  # Ctrl-C: commit, leave, exit 130
        for proc in (a, b):
            proc.wait(timeout=30)
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    outs = [(f.read_bytes(), f.with_suffix(".err").read_bytes()) for f in files]
    assert [a.returncode, b.returncode] == [130, 130], [err for _, err in outs]
    seen = [[json.loads(line) for line in out.splitlines()] for out, _ in outs]
    assert all(len(s) > 0 for s in seen), "each member printed records of its own partitions"
    keys = [(r["topic"], r["partition"], r["offset"]) for s in seen for r in s]
    assert len(keys) == len(set(keys)) == 900, "every record printed exactly once across both"
    values = sorted(r["value"] for s in seen for r in s)
    assert values == sorted([f"s{i}" for i in range(600)] + [f"o{i}" for i in range(300)])
    # each says what it was given, and Ctrl-C ends it as an interruption
    for _, err in outs:
        assert b"assigned" in err and b"interrupted" in err
        assert re.search(rb"consumed [\d,]+ records? in .* as group cli-shared; committed ", err)


def test_group_consume_starts_at_the_committed_offsets_and_commits_what_it_printed(
    broker_factory,
):
    broker = broker_factory(GROUP_TOPICS)
    group = "cli-resume"
    produce(broker, "orders", [f"a{i}" for i in range(10)])
    first = sluice(broker, "consume", "orders", "--group", group, "-n", "4", "--timeout", "30s")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 4
    assert b"consumed 4 records" in first.stderr
    committed = sum(r["committed_offset"] or 0 for r in describe(broker, group)["offsets"])
    assert committed == 4, "only what was printed is committed"

    rest = sluice(broker, "consume", "orders", "--group", group, "--timeout", "30s")
    assert rest.returncode == 0, rest.stderr
    assert sorted(first.stdout.splitlines() + rest.stdout.splitlines()) == sorted(
        f"a{i}".encode() for i in range(10)
    )
    assert b"consumed 6 records" in rest.stderr

    started = time.monotonic()
    again = sluice(broker, "consume", "orders", "--group", group, "--timeout", "30s")
    assert again.returncode == 0 and again.stdout == b"", again.stderr
    assert b"consumed 0 records" in again.stderr
    assert time.monotonic() - started < 25, "a caught-up member stops without --follow"

    one = sluice(broker, "consume", "orders", "--group", "cli-other", "--from", "latest", "-q")
    assert one.returncode == 0 and one.stdout == b"" and one.stderr == b""


def test_group_consume_refuses_flags_that_fight_the_group(broker_factory):
    broker = broker_factory(GROUP_TOPICS)
    done = sluice(broker, "consume", "orders", "--group", "g", "--partition", "1")
    assert done.returncode == 2
    assert b"--partition does not go with --group" in done.stderr
    assert b"sluice groups reset-offsets g" in done.stderr
    missing = sluice(broker, "consume", "nope", "--group", "g")
    assert missing.returncode == 1 and b"topic 'nope' does not exist" in missing.stderr
