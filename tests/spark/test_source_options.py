"""The source's options (Kafka's names and meanings) and the streaming admission control,
as pure functions: no broker, no Spark."""

from __future__ import annotations

import pytest

from spark.datasource.broker import PartitionMeta
from spark.datasource.options import (
    EARLIEST,
    KAFKA_SOURCE_OPTIONS,
    LATEST,
    SluiceOptionError,
    parse_duration_ms,
    parse_source_options,
)
from spark.datasource.plan import as_doc, from_doc, plan_ranges
from spark.datasource.stream_limits import TriggerDelay, backlog, rate_limit

BASE = {"bootstrap": "http://127.0.0.1:1", "apiKey": "k.s"}


def parse(streaming=True, **options):
    return parse_source_options({**BASE, **options}, streaming=streaming)


def test_kafka_has_23_source_options_and_two_are_refused():
    assert len(KAFKA_SOURCE_OPTIONS) == 23
    assert sorted(n for n, why in KAFKA_SOURCE_OPTIONS.items() if why) == [
        "groupIdPrefix",
        "kafka.group.id",
    ]


def test_subscriptions_by_kafkas_names():
    assert parse(subscribe="a, b").subscription.topics == ("a", "b")
    assert parse(topic="a").subscription.kind == "subscribe"  # Sluice's older name
    assert parse(subscribePattern="ev-.*").subscription.pattern == "ev-.*"
    sub = parse(assign='{"b": [1], "a": [2, 0]}').subscription
    assert sub.kind == "assign" and sub.assignment == (("a", 0), ("a", 2), ("b", 1))
    with pytest.raises(SluiceOptionError, match=r"exactly one of.*got assign, subscribe"):
        parse(subscribe="a", assign='{"a": [0]}')
    with pytest.raises(SluiceOptionError, match="exactly one of"):
        parse()
    with pytest.raises(SluiceOptionError, match="not a regex"):
        parse(subscribePattern="(")


def test_bootstrap_under_both_names_and_case_insensitive():
    opts = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "http://h:1", "apikey": "k.s", "SUBSCRIBE": "t"},
        streaming=True,
    )
    assert opts.bootstrap == "http://h:1"
    with pytest.raises(SluiceOptionError, match=r"'kafka\.bootstrap\.servers'"):
        parse_source_options({"apiKey": "k.s", "subscribe": "t"}, streaming=True)


def test_unsupported_options_are_refused_all_at_once():
    with pytest.raises(SluiceOptionError) as e:
        parse(
            subscribe="t",
            groupIdPrefix="g",
            **{"kafka.security.protocol": "SSL", "startingOffset": "earliest"},
        )
    msg = str(e.value)
    assert "'groupIdPrefix' (the source joins no consumer group" in msg
    assert "'kafka.security.protocol' (a Kafka consumer setting)" in msg
    assert "'startingOffset' (unknown)" in msg
    assert "maxOffsetsPerTrigger" in msg  # the supported list follows


def test_offsets_and_timestamps_follow_kafkas_precedence():
    o = parse(subscribe="t")
    assert o.starting.default == LATEST  # streaming starts at the end by default
    assert parse(streaming=False, subscribe="t").starting.default == EARLIEST
    o = parse(subscribe="t", startingOffsets='{"t": {"0": 5, "1": -2}}')
    assert o.starting.offset_for("t", 0) == 5 and o.starting.offset_for("t", 1) == EARLIEST
    assert o.starting.offset_for("t", 2) == LATEST
    o = parse(
        subscribe="t",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"t": {"0": 1000}}',
        startingTimestamp="2000",
    )
    assert o.starting.timestamp_for("t", 0) == 2000  # startingTimestamp wins
    o = parse(subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 1000}}')
    assert o.starting.timestamp_for("t", 0) == 1000 and o.starting.timestamp_for("t", 1) is None
    assert o.by_timestamp_strategy == "error"
    with pytest.raises(SluiceOptionError, match="'error' or 'latest'"):
        parse(subscribe="t", startingOffsetsByTimestampStrategy="skip")
    with pytest.raises(SluiceOptionError, match="use 'earliest', 'latest' or JSON"):
        parse(subscribe="t", startingOffsets="yesterday")
    with pytest.raises(SluiceOptionError, match="offset -3 of t-0"):
        parse(subscribe="t", startingOffsets='{"t": {"0": -3}}')


def test_batch_and_stream_only_options():
    with pytest.raises(SluiceOptionError, match="endingOffsets do not apply to streaming"):
        parse(subscribe="t", endingOffsets="latest")
    with pytest.raises(SluiceOptionError, match="maxOffsetsPerTrigger do not apply to batch"):
        parse(streaming=False, subscribe="t", maxOffsetsPerTrigger="10")
    with pytest.raises(SluiceOptionError, match="'latest' reads nothing in a batch"):
        parse(streaming=False, subscribe="t", startingOffsets="latest")
    with pytest.raises(SluiceOptionError, match="above maxOffsetsPerTrigger"):
        parse(subscribe="t", maxOffsetsPerTrigger="10", minOffsetsPerTrigger="20")
    with pytest.raises(SluiceOptionError, match="positive whole number"):
        parse(subscribe="t", maxOffsetsPerTrigger="0")
    o = parse(subscribe="t", includeHeaders="TRUE", failOnDataLoss="false", maxTriggerDelay="2s")
    assert o.include_headers and not o.fail_on_data_loss and o.max_trigger_delay_ms == 2000
    assert parse(subscribe="t").include_headers is False  # Kafka's default


def test_durations():
    assert parse_duration_ms("d", "500") == 500
    assert parse_duration_ms("d", "15m") == 900_000
    assert parse_duration_ms("d", "1h") == 3_600_000
    with pytest.raises(SluiceOptionError, match="duration"):
        parse_duration_ms("d", "soon")


def test_offsets_json_round_trip_is_ordered():
    offsets = {("b", 10): 3, ("a", 2): 7, ("a", 0): 1}
    doc = as_doc(offsets)
    assert list(doc) == ["a", "b"] and list(doc["a"]) == ["0", "2"]
    assert doc == {"a": {"0": 1, "2": 7}, "b": {"10": 3}}
    assert from_doc(doc) == offsets


def test_rate_limit_spreads_over_backlog():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 50, ("t", 3): 2}
    # backlog 900 + 100 + 0 + 2 (new partition from 0) = 1002, limit 100
    end = rate_limit(100, start, latest)
    assert end == {("t", 0): 89, ("t", 1): 109, ("t", 2): 50, ("t", 3): 1}
    assert backlog(start, latest) == 1002
    assert rate_limit(5000, start, latest) == latest  # under the limit: everything
    # never past the end, never backwards
    assert all(start.get(tp, 0) <= o <= latest[tp] for tp, o in end.items())


def test_trigger_delay_waits_for_min_offsets_at_most_max_delay():
    d = TriggerDelay(min_offsets=100, max_delay_ms=1000)
    assert d.hold(10, now_ms=0)  # first trigger starts the clock
    assert d.hold(50, now_ms=900)
    assert not d.hold(50, now_ms=1000)  # waited long enough
    assert d.hold(99, now_ms=1500)
    assert not d.hold(100, now_ms=1600)  # enough offsets
    assert d.hold(0, now_ms=1700)


def test_min_partitions_split_ranges_by_share():
    metas = {("t", p): PartitionMeta("t", p, 1, "u") for p in range(2)}
    ranges = plan_ranges(metas, {}, {("t", 0): 300, ("t", 1): 100}, 1000, min_partitions=4)
    assert [(r.partition, r.start, r.end) for r in ranges] == [
        (0, 0, 100),
        (0, 100, 200),
        (0, 200, 300),
        (1, 0, 100),
    ]
    assert len(plan_ranges(metas, {}, {("t", 0): 300, ("t", 1): 100}, 1000)) == 2
