"""The console at phone width (issue 24, item 8): at 390 px the navigation collapses behind a
Menu button and every page fits the viewport, wide tables scrolling inside their own box.
Then the same pages at 1366 px: the sidebar shows, nothing overflows, and no broker's row in
the Brokers table wraps. Its own topic (a record with a long value) and consumer group, so the
topic's tabs and a group's page have content; the script (narrow.e2e.mjs) screenshots each
page."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from .conftest import ARTIFACTS, Stack, browse_script

GROUP = "narrow-readers"


def call(stack: Stack, method: str, url: str, body=None) -> tuple[int, object]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    req.method = method
    req.add_header("Authorization", f"Bearer {stack.state['api_key']}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def narrow_topic(stack: Stack) -> str:
    """A two-partition topic with one long record on partition 0, read and committed by
    GROUP, so its Messages and Consumers tabs and the group's page are not empty."""
    from brokernodes.client import GroupConsumer

    topic = f"narrow-{int(time.time()):x}"
    new = {"name": topic, "partitions": 2}
    status, doc = call(stack, "POST", f"{stack.url}/api/v1/topics/", new)
    assert status in (200, 201), doc
    cluster = f"{stack.state['leader_url']}/v3/clusters/{stack.state['cluster_id']}"
    record = {
        "partition_id": 0,
        "key": {"type": "STRING", "data": "narrow-key"},
        "value": {"type": "STRING", "data": "narrow-" + "x" * 300},
    }
    deadline = time.monotonic() + 20
    while True:  # the new partition's leader may take a moment to be known
        status, doc = call(stack, "POST", f"{cluster}/topics/{topic}/records", record)
        if status == 200:
            break
        assert time.monotonic() < deadline, (status, doc)
        time.sleep(0.5)
    consumer = GroupConsumer(
        stack.state["brokers"],
        stack.state["api_key"],
        group_id=GROUP,
        topics=[topic],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got, deadline = [], time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += consumer.poll(timeout=1.0)
        assert got, "the group read nothing"
        consumer.commit()
    finally:
        consumer.close()
    return topic


def test_every_page_fits_a_phone_screen(stack: Stack) -> None:
    topic = narrow_topic(stack)
    out = browse_script(stack, "narrow.e2e.mjs", NARROW_TOPIC=topic, NARROW_GROUP=GROUP)
    assert not re.search(r"^FAIL", out, re.M)
    for step in (
        "sign in at 390 px: the navigation starts collapsed",
        "Escape closes the menu and gives focus back to the button; Enter opens it",
        "a topic's tabs all fit",
        "brokers: the wide table scrolls sideways on its own",
        "audit log",
        "at 1366 px the sidebar shows and every page fits beside it",
        "at 1366 px no data cell of the Brokers table wraps",
    ):
        assert re.search(rf"^ok +{re.escape(step)} \(", out, re.M), step
    shots = {p.name for p in ARTIFACTS.glob("narrow-*.png")}
    pages = "overview menu-open topics topic-configs topic-live-tail messages groups group-detail"
    pages += " brokers reports service-accounts api-keys acls quotas audit"
    for page in pages.split():
        assert any(re.fullmatch(rf"narrow-\d\d-{page}\.png", s) for s in shots), page
