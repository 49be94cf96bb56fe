"""The pure parts of the brokers' group shell: coordinator lookup (Kafka's hash), tenant
qualification, signed cursors, health and reset-request parsing."""

from __future__ import annotations

import pytest

from brokernodes.errors import InvalidRequestError
from brokernodes.groups import ResetStrategy
from brokernodes.server.coordinator.offsets_topic import (
    java_string_hash,
    partition_for,
    qualify,
    unqualify,
)
from brokernodes.server.coordinator.service import health
from brokernodes.server.http.groups import reset_spec
from brokernodes.server.protocol import cursor as cursors


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("group", 98629247), ("my-consumer-group", 1513705513), ("é", 233)],
)
def test_java_string_hash_matches_java(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_is_kafkas_abs_hash_mod():
    # Utils.abs(hashCode) % n, with Utils.abs(x) = x & 0x7fffffff
    assert partition_for("my-consumer-group", 50) == 1513705513 % 50
    assert partition_for("zz", 7) == (java_string_hash("zz") & 0x7FFFFFFF) % 7
    negative = next(f"group-{i}" for i in range(1000) if java_string_hash(f"group-{i}") < 0)
    assert partition_for(negative, 50) == (java_string_hash(negative) & 0x7FFFFFFF) % 50
    assert {partition_for(f"g{i}", 12) for i in range(200)} == set(range(12))


def test_groups_are_qualified_by_tenant():
    assert qualify(None, "g") == "g" and unqualify("g") == (None, "g")
    assert qualify("t1", "a/b") == "t1/a/b" and unqualify("t1/a/b") == ("t1", "a/b")
    assert qualify("t1", "g") != qualify("t2", "g")


def test_cursor_round_trip_and_tampering():
    c = cursors.Cursor("tenant", "orders", "id-1", {0: 5, 1: 7})
    text = cursors.encode(c, "secret")
    assert cursors.decode(text, "secret") == c
    with pytest.raises(cursors.InvalidCursorError):
        cursors.decode(text, "other-secret")
    _, mac = text.split(".")
    forged = cursors.encode(cursors.Cursor("tenant", "orders", "id-1", {0: 0, 1: 0}), "x")
    with pytest.raises(cursors.InvalidCursorError):
        cursors.decode(forged.split(".")[0] + "." + mac, "secret")
    for garbage in ("", "abc", "a.b.c", "!!!.???"):
        with pytest.raises(cursors.InvalidCursorError):
            cursors.decode(garbage, "secret")


@pytest.mark.parametrize(
    ("members", "lag", "time_lag", "expected"),
    [
        (0, 0, None, "EMPTY"),
        (0, 5, 10, "STOP"),
        (2, 0, 0, "OK"),
        (2, 3, 20_000, "WARN"),
        (2, 3, 90_000, "ERR"),
        (2, 3, 600_000, "STALL"),
    ],
)
def test_health(members, lag, time_lag, expected):
    assert health(members, lag, time_lag, True) == expected


def test_reset_spec_parsing():
    assert reset_spec({"strategy": "earliest"}).strategy is ResetStrategy.TO_EARLIEST
    assert reset_spec({"strategy": "offset", "value": 3}).value == 3
    assert reset_spec({"strategy": "shift-by", "value": -2}).value == -2
    assert reset_spec({"strategy": "by-duration", "value": "PT1M"}).value == 60_000
    assert reset_spec({"strategy": "datetime", "value": "1970-01-01T00:00:01Z"}).value == 1000
    for bad in (
        {"strategy": "sideways"},
        {"strategy": "offset", "value": -1},
        {"strategy": "offset", "value": "3"},
        {"strategy": "shift-by"},
        {"strategy": "datetime", "value": "yesterday"},
    ):
        with pytest.raises(InvalidRequestError):
            reset_spec(bad)
