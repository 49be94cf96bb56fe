"""The message browser's merge and cursor (``backend.console.browse``), pure: partitions'
scans given as data. Reading from real brokers is in
tests/integration/control_plane/test_console_browse.py."""

from __future__ import annotations

from backend.console.browse import (
    RESPONSE_BYTES,
    BrowseQuery,
    _merge,
    _next_cursor,
    _Part,
    format_cursor,
    parse_cursor,
)


def rec(p: int, offset: int, ts: int) -> dict:
    return {"partition": p, "offset": offset, "timestamp": ts, "key": None, "value": "v"}


def part(p: int, matches: list[dict], *, position: int, begin: int = 0, end: int = 10) -> _Part:
    return _Part(p, "http://b", begin=begin, end=end, matches=matches, position=position)


def test_newest_first_keeps_each_partitions_order_when_its_timestamps_go_back():
    # partition 0's producer clock went back: offset 8 is older than offset 7
    a = part(0, [rec(0, 9, 300), rec(0, 8, 100), rec(0, 7, 250)], position=0)
    b = part(1, [rec(1, 9, 200)], position=0)
    q = BrowseQuery(limit=10)
    out, taken = _merge([a, b], q)
    assert [(r["partition"], r["offset"]) for r in out] == [(0, 9), (1, 9), (0, 8), (0, 7)]
    assert _next_cursor([a, b], taken, q) is None  # both read to their start, all shown


def test_a_page_stops_where_a_partition_cut_short_by_the_budget_runs_out():
    # partition 1 read only offsets 9..6 (budget) and found one match: what it has not read
    # may be newer than partition 0's older records, so the page ends after its match
    a = part(0, [rec(0, 9, 500), rec(0, 8, 300), rec(0, 7, 100)], position=0)
    b = part(1, [rec(1, 9, 400)], position=6)
    q = BrowseQuery(limit=10)
    out, taken = _merge([a, b], q)
    assert [(r["partition"], r["offset"]) for r in out] == [(0, 9), (1, 9)]
    assert parse_cursor(_next_cursor([a, b], taken, q)) == {0: 9, 1: 6}


def test_nothing_in_hand_from_an_unfinished_partition_gives_an_empty_page_that_moves_on():
    a = part(0, [rec(0, 9, 500)], position=0)
    b = part(1, [], position=6)
    q = BrowseQuery(limit=10)
    out, taken = _merge([a, b], q)
    assert out == []
    assert parse_cursor(_next_cursor([a, b], taken, q)) == {0: 10, 1: 6}


def test_oldest_first_cursor_is_the_next_offset_of_every_partition():
    a = part(0, [rec(0, 0, 100), rec(0, 1, 300)], position=2, end=2)
    b = part(1, [rec(1, 0, 200), rec(1, 1, 400)], position=2, end=2)
    q = BrowseQuery(start="earliest", limit=3)
    out, taken = _merge([a, b], q)
    assert [r["timestamp"] for r in out] == [100, 200, 300]
    assert parse_cursor(_next_cursor([a, b], taken, q)) == {0: 2, 1: 1}


def test_cursor_text_round_trips():
    assert format_cursor({2: 7, 0: 120}) == "0:120,2:7"
    assert parse_cursor("0:120,2:7") == {0: 120, 2: 7}
    assert format_cursor({}) is None


def test_a_page_holds_at_most_its_byte_cap_of_keys_and_values_and_goes_on_from_there():
    big = "x" * (RESPONSE_BYTES // 2)
    a = part(0, [{**rec(0, 9 - i, 900 - i), "value": big} for i in range(3)], position=0)
    q = BrowseQuery(limit=10)
    out, taken = _merge([a], q)
    assert [r["offset"] for r in out] == [9, 8]
    assert parse_cursor(_next_cursor([a], taken, q)) == {0: 8}
    # one record over the cap still comes: a page is never empty for size alone
    huge = part(0, [{**rec(0, 9, 900), "value": big * 3}], position=0)
    assert len(_merge([huge], q)[0]) == 1
