"""Charts with history on load that tell the truth (issue 24, items 2 and 3): three hours of
live-series history for this module's own topic and group go in through the sink the live
job and the sampler share (tests/e2e/seed_history.py); charts.e2e.mjs then checks the
overview, the topic's throughput tab and the group's lag chart draw them on first load, on
a real time axis, and sizes read "not measured yet" instead of 0 B."""

from __future__ import annotations

import json
import re
import time

from .conftest import ARTIFACTS, Stack, browse_script, call, topic_read_by_group

GROUP = "charts-readers"


def charts_topic(stack: Stack) -> str:
    """A topic with a record, read and committed by GROUP, so the group's page exists."""
    return topic_read_by_group(
        stack,
        {"name": f"charts-{int(time.time()):x}"},
        {"partition_id": 0, "value": {"type": "STRING", "data": "charts"}},
        GROUP,
    )


def test_charts_draw_history_on_first_load(stack: Stack) -> None:
    topic = charts_topic(stack)
    org = stack.state["organisation"]
    seeded = json.loads(stack.python("-m", "tests.e2e.seed_history", org, topic, GROUP))
    assert seeded["minutes"] == 180 and seeded["lag_samples"] == 120
    # the API serves the seeded hours to the organisation (the browser reads the same)
    status, doc = call(stack, "GET", f"{stack.url}/api/v1/reports/live/throughput/?topic={topic}")
    assert status == 200, doc
    (total,) = doc["totals"]
    # the seeded minutes, and at most the few records this module produced and read since
    # (the sampler or the live job counts those too)
    assert seeded["records_in"] <= total["records_in"] <= seeded["records_in"] + 5, total
    out = browse_script(
        stack, "charts.e2e.mjs", CHARTS_TOPIC=topic, CHARTS_GROUP=GROUP, CHARTS_MINUTES="180"
    )
    for step in (
        "the overview draws the last hours on first load",
        "a topic's throughput tab draws its history on first load",
        "a topic's partition sizes say not measured yet, never 0 B",
        "a group's page draws its lag over time on first load",
    ):
        assert re.search(rf"^ok +{re.escape(step)} \(", out, re.M), step
    shots = {p.name for p in ARTIFACTS.glob("charts-*.png")}
    pages = ("overview-history", "topic-throughput-history", "topic-sizes", "group-lag-history")
    for page in pages:
        assert any(re.fullmatch(rf"charts-\d\d-{page}\.png", s) for s in shots), page
