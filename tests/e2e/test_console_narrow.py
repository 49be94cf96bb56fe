"""The console at phone width (issue 24, item 8): at 390 px the navigation collapses behind a
Menu button and every page fits the viewport, wide tables scrolling inside their own box.
Then the same pages at 1366 px: the sidebar shows, nothing overflows, and no broker's row in
the Brokers table wraps. Its own topic (a record with a long value) and consumer group, so the
topic's tabs and a group's page have content; the script (narrow.e2e.mjs) screenshots each
page."""

from __future__ import annotations

import re
import time

from .conftest import ARTIFACTS, Stack, browse_script, topic_read_by_group

GROUP = "narrow-readers"


def narrow_topic(stack: Stack) -> str:
    """A two-partition topic with one long record on partition 0, read and committed by
    GROUP, so its Messages and Consumers tabs and the group's page are not empty."""
    return topic_read_by_group(
        stack,
        {"name": f"narrow-{int(time.time()):x}", "partitions": 2},
        {
            "partition_id": 0,
            "key": {"type": "STRING", "data": "narrow-key"},
            "value": {"type": "STRING", "data": "narrow-" + "x" * 300},
        },
        GROUP,
    )


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
