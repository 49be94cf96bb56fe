"""The console end to end in headless Chromium (playwright-core) against the stack
``infra/run_local.py`` starts: sign in, create a topic, produce, find messages in the
browser (every partition newest first, one partition, a scan budget with its progress, a long
value whole), a live tail on every partition and on one, live bytes in/out on the overview
(and none in another organisation), reports drawn from stored rows, access pages, a consumer
group's lag and an offset reset with preview and undo, then a read-only member: no edit
actions, the API refuses a write, and their open live tail closes when they are removed. Every
page's screenshot lands in test-artifacts/console/."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest

from .conftest import ARTIFACTS, Stack, browse_script

GROUP = "e2e-readers"


def api(stack: Stack, method: str, path: str, body=None, *, key: str | None = None):
    url = stack.url + path
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    req.method = method
    req.add_header("Authorization", f"Bearer {key or stack.state['api_key']}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def reader(stack: Stack) -> dict:
    """A second person, owner of their own organisation (e2e-reader, no traffic) and a
    read-only member of Demo, invited by Demo's admin key through the members API (and
    accepting through the API with their own session)."""
    me = json.loads(
        stack.python(
            "manage.py",
            "seed_demo",
            "--organisation=e2e-reader",
            "--username=e2e-reader",
            "--service-account=e2e-reader-app",
            "--json",
        )
    )
    member = {"username": me["username"], "role": "read-only"}
    status, invitation = api(stack, "POST", "/api/v1/members/", member)
    assert status == 202, invitation
    accept_invitation(stack, me["username"], me["password"], invitation["id"])
    return me


def accept_invitation(stack: Stack, username: str, password: str, invitation_id: str) -> None:
    """Sign in as the invited person (session and CSRF cookie) and accept the invitation."""
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def call(path: str, body=None) -> dict:
        req = urllib.request.Request(stack.url + path, data=json.dumps(body or {}).encode())
        token = next((c.value for c in jar if c.name == "csrftoken"), "")
        req.add_header("Content-Type", "application/json")
        req.add_header("X-CSRFToken", token)
        req.add_header("Referer", stack.url + "/")
        with opener.open(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    with opener.open(stack.url + "/api/v1/auth/csrf", timeout=10):
        pass
    call("/api/v1/auth/login", {"username": username, "password": password})
    call(f"/api/v1/auth/invitations/{invitation_id}/accept")


@pytest.fixture(scope="module")
def reports(stack: Stack) -> dict:
    """Report rows for Demo's topic stored through the analytics services (no Spark run)."""
    org, topic = stack.state["organisation"], stack.state["topic"]
    return json.loads(stack.python("-m", "tests.e2e.seed_reports", org, topic))


def browse(stack: Stack, *, group: str = "", group_only: bool = False, **env: str) -> str:
    return browse_script(
        stack,
        "console.e2e.mjs",
        GROUP=group,
        GROUP_ONLY="1" if group_only else "0",
        **env,
    )


def consume_websockets(stack: Stack) -> int:
    """Open consume WebSockets on all brokers (their /metrics, with the cluster secret)."""
    total = 0
    for url in stack.state["brokers"]:
        req = urllib.request.Request(f"{url}/metrics")
        req.add_header("Authorization", f"Cluster {stack.cluster_secret}")
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        for m in re.finditer(
            r'^sluice_websocket_connections\{stream="consume"\} (\S+)$', text, re.M
        ):
            total += int(float(m.group(1)))
    return total


def traffic(stack: Stack, key: str | None = None) -> dict:
    status, doc = api(stack, "GET", "/api/v1/console/traffic", key=key)
    assert status == 200, doc
    return doc


def test_console_pages_in_a_real_browser(stack, reports, reader):
    assert all(reports["written"].values()), reports
    out = browse(
        stack,
        REPORT_TOPIC=reports["topic"],
        PEAK_RECORDS=str(reports["peak_records"]),
    )
    for step in (
        "sign in",
        "create a topic",
        "produce a test message",
        "message browser",
        "messages: newest first across partitions, then one partition",
        "messages: a scan budget shows its progress and scans further",
        "messages: a long value is cut in the table and opens whole",
        "live tail receives new records from every partition",
        "live tail follows one chosen partition",
        "overview shows live bytes in and out per second",
        "reports page draws stored reports",
        "API key shown once",
        "sign out",
    ):
        assert re.search(rf"^ok .*{re.escape(step)}", out, re.M), step
    shots = sorted(p.name for p in ARTIFACTS.glob("[0-9]*.png"))
    for page in (
        "overview",
        "topics",
        "topic-detail",
        "messages",
        "messages-all-partitions",
        "messages-partition-filter",
        "messages-scan-budget",
        "messages-long-value",
        "live-tail",
        "overview-traffic",
        "organisation-switched-overview",
        "brokers",
        "reports",
        "service-accounts",
        "api-key-created",
        "acls",
        "quotas",
        "audit",
    ):
        assert any(page in s for s in shots), (page, shots)
    # the browser is gone: the live tail's upstream stream on the broker closed with it
    deadline = time.monotonic() + 10
    while consume_websockets(stack) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert consume_websockets(stack) == 0
    # the byte counters behind the overview: Demo's on every broker, none for another tenant
    mine = traffic(stack)
    assert len(mine["brokers"]) == 3 and not mine["errors"], mine
    assert sum(c["bytes_in"] for c in mine["counters"]) > 2048, mine
    assert sum(c["bytes_out"] for c in mine["counters"]) > 0, mine
    other = traffic(stack, reader["api_key"])
    assert len(other["brokers"]) == 3 and other["counters"] == [], other


def test_consumer_group_lag_and_offset_reset(stack, reader):
    from brokernodes.client import GroupConsumer

    key, topic = stack.state["api_key"], stack.state["topic"]
    produce_url = f"{stack.state['leader_url']}/v3/clusters/{stack.state['cluster_id']}"

    def produce(n: int) -> None:
        for i in range(n):
            req = urllib.request.Request(
                f"{produce_url}/topics/{topic}/records",
                data=json.dumps(
                    {"partition_id": 0, "value": {"type": "STRING", "data": f"r{i}"}}
                ).encode(),
                method="POST",
            )
            req.add_header("Authorization", f"Bearer {key}")
            req.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(req, timeout=10) as r:
                assert r.status == 200

    produce(2)
    consumer = GroupConsumer(
        stack.state["brokers"],
        key,
        group_id=GROUP,
        topics=[topic],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got, deadline = [], time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += consumer.poll(timeout=1.0)
        assert len(got) >= 2
        consumer.commit()
    finally:
        consumer.close()  # leaves the group: an empty group may be reset
    produce(4)
    deadline = time.monotonic() + 20
    while True:
        status, doc = api(stack, "GET", f"/api/v1/groups/{GROUP}/")
        lag = sum(o.get("lag") or 0 for o in doc.get("offsets", [])) if status == 200 else 0
        if lag >= 4 and not doc.get("members"):
            break
        assert time.monotonic() < deadline, (status, doc)
        time.sleep(0.3)
    out = browse(
        stack,
        group=GROUP,
        group_only=True,
        READER_USER=reader["username"],
        READER_PASSWORD=reader["password"],
    )
    for step in (
        "a read-only member sees no edit actions",
        "the API refuses a read-only member's write",
        "an open live tail closes when the member is removed",
    ):
        assert re.search(rf"^ok .*{re.escape(step)}", out, re.M), step
    shots = {p.name for p in ARTIFACTS.glob("groups-*.png")}
    for page in ("readonly-topics", "readonly-configs", "readonly-group", "readonly-tail-closed"):
        assert any(page in s for s in shots), (page, shots)
