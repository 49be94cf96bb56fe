"""The console's message browser across partitions, against a real control plane and two real
brokers: newest first merged by timestamp, pages by cursor, the partition filter, oldest
first from the earliest offset, an offset or a time on every partition, the scan budget with
its progress, full values, and the refusals of a bad cursor or budget."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest

from harness.control_plane import REST_CLUSTER

from .conftest import http, start_control_plane, wait_for

TOPIC = "browse-all"
N = 30  # record i goes to partition i % 3 with timestamp BASE + i s
BASE = 1_700_000_000_000
BIG = 200_000  # record 29's value carries this many characters


class Console:
    """A signed-in console session (cookie and CSRF token)."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.url = url
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.opener.open(f"{url}/api/v1/auth/csrf", timeout=10).read()
        csrf = next(c.value for c in self.jar if c.name == "csrftoken")
        req = urllib.request.Request(
            f"{url}/api/v1/auth/login",
            data=json.dumps({"username": username, "password": password}).encode(),
            headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
            method="POST",
        )
        with self.opener.open(req, timeout=10) as r:
            assert r.status == 200

    def browse(self, **query) -> tuple[int, dict]:
        q = urllib.parse.urlencode(query)
        try:
            with self.opener.open(
                f"{self.url}/api/v1/console/topics/{TOPIC}/messages?{q}", timeout=30
            ) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            with contextlib.closing(e):
                return e.code, json.loads(e.read())


def numbers(page: dict) -> list[int]:
    return [r["value"]["i"] for r in page["records"]]


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """One control plane, two brokers and the topic for every test here (they only read)."""
    with start_control_plane(tmp_path_factory.mktemp("browse")) as cp:
        yield _seed(cp)


def _seed(cp) -> Console:
    t = cp.tenant("browse")
    key = t["api_key"]
    cp.start_broker(1)
    cp.start_broker(2)
    status, body = cp.api(
        "POST", "topics/", {"name": TOPIC, "partitions": 3, "replication_factor": 1}, key=key
    )
    assert status == 201, body
    leaders: dict[int, str] = {}

    def led():
        for b in cp.brokers:
            s, meta = http("GET", f"{b.url}/sluice/v1/metadata", key=key)
            for t_ in meta.get("topics", []) if s == 200 else []:
                for p in t_["partitions"] if t_["name"] == TOPIC else []:
                    if p.get("log_end_offset") is not None:
                        leaders[int(p["partition"])] = b.url
        return len(leaders) == 3

    wait_for("the brokers to lead the topic's partitions", led, timeout=30)
    for i in range(N):
        value = {"i": i, "even": i % 2 == 0, **({"pad": "x" * BIG} if i == N - 1 else {})}
        record = {
            "partition_id": i % 3,
            "key": {"type": "STRING", "data": f"k{i}"},
            "value": {"type": "JSON", "data": value},
            "timestamp": BASE + i * 1000,
        }
        status, body = http(
            "POST",
            f"{leaders[i % 3]}/v3/clusters/{REST_CLUSTER}/topics/{TOPIC}/records",
            record,
            key=key,
        )
        assert status == 200, body
    c = Console(cp.url, t["username"], t["password"])
    wait_for("the console to browse", lambda: c.browse()[1].get("to_scan") == N, timeout=30)
    return c


def test_newest_first_across_partitions_and_pages_by_cursor(console):
    status, page = console.browse()
    assert status == 200, page
    assert page["order"] == "newest_first"
    assert numbers(page) == list(range(N - 1, -1, -1))
    assert [p["partition"] for p in page["partitions"]] == [0, 1, 2]
    assert page["scanned"] == page["to_scan"] == N
    assert page["cursor"] is None and page["reached_end"]
    # the long value comes whole
    assert len(page["records"][0]["value"]["pad"]) == BIG

    seen: list[int] = []
    cursor = None
    for _ in range(10):
        _, page = console.browse(limit=7, **({"cursor": cursor} if cursor else {}))
        assert len(page["records"]) <= 7
        seen += numbers(page)
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == list(range(N - 1, -1, -1)), seen


def test_partition_filter_and_oldest_first_starts(console):
    _, page = console.browse(partition=1)
    assert numbers(page) == [i for i in range(N - 1, -1, -1) if i % 3 == 1]
    assert [p["partition"] for p in page["partitions"]] == [1]

    _, page = console.browse(start="earliest", limit=5)
    assert page["order"] == "oldest_first" and numbers(page) == [0, 1, 2, 3, 4]
    _, more = console.browse(start="earliest", limit=5, cursor=page["cursor"])
    assert numbers(more) == [5, 6, 7, 8, 9]

    # a time: each partition from its first record at or after it
    _, page = console.browse(start="timestamp", timestamp=BASE + 10_500, limit=4)
    assert numbers(page) == [11, 12, 13, 14]
    # an offset: the same offset on every partition (record i sits at offset i // 3)
    _, page = console.browse(start="offset", offset=5, limit=50)
    assert numbers(page) == list(range(15, N))
    _, page = console.browse(start="offset", offset=5, partition=2)
    assert numbers(page) == [i for i in range(15, N) if i % 3 == 2]
    assert page["reached_end"]


def test_a_small_scan_budget_shows_progress_and_keeps_the_order(console):
    # one match, the oldest record of partition 2; 12 records a page: 4 per partition
    pages = []
    cursor = None
    for _ in range(6):
        extra = {"cursor": cursor} if cursor else {}
        status, page = console.browse(json_path="$.i", json_value="2", scan_budget=12, **extra)
        assert status == 200, page
        pages.append(page)
        assert page["scanned"] <= 12 and page["scan_budget"] == 12
        cursor = page["cursor"]
        if page["records"] or cursor is None:
            break
    assert numbers(pages[-1]) == [2]
    assert pages[0]["to_scan"] == N and pages[0]["records"] == []
    assert sum(p["scanned"] for p in pages) <= N
    assert len(pages) == 3, [p["scanned"] for p in pages]
    # a filter keeps newest first across partitions
    _, page = console.browse(json_path="$.even", json_value="true", limit=4)
    assert numbers(page) == [28, 26, 24, 22]


BAD = [
    ({"cursor": "zero:1"}, "cursor"),
    ({"cursor": "7:1"}, "cursor"),
    ({"cursor": "2:1", "partition": 0}, "cursor"),
    ({"scan_budget": 5}, "scan_budget"),
    ({"scan_budget": 10**9}, "scan_budget"),
    ({"partition": 3}, "partition"),
    ({"start": "offset"}, "offset"),
]


def test_bad_browse_parameters_name_the_field(console):
    for query, field in BAD:
        status, body = console.browse(**query)
        assert status == 400, (query, body)
        assert field in body["fields"], (query, body)
        assert body["error_code"] and body["message"], body
