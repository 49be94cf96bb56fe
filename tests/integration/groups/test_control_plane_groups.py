"""Consumer groups under the control plane: ``__consumer_offsets`` is created as an internal
topic no tenant sees; group names are tenant-scoped on the brokers; the control plane's
groups API (console contract) lists, describes with lag, resets (dry run, apply, undo,
audited) and deletes through the coordinator broker."""

from __future__ import annotations

import pytest

from tests.integration.control_plane.conftest import (
    ControlPlane,
    http,
    start_control_plane,
    wait_for,
)


@pytest.fixture
def control_plane(tmp_path):
    with start_control_plane(tmp_path) as cp:
        yield cp


def hb(broker, group: str, key: str, **body):
    return http("POST", f"{broker.url}/sluice/v1/groups/{group}/heartbeat", body, key=key)


def test_groups_are_tenant_scoped_and_the_api_resets_and_undoes(control_plane: ControlPlane):
    cp = control_plane
    a, b = cp.tenant("alpha"), cp.tenant("bravo")
    ka, kb = a["api_key"], b["api_key"]
    broker = cp.start_broker(1)
    for key in (ka, kb):
        s, _ = cp.api("POST", "topics/", {"name": "orders", "partitions": 2}, key=key)
        assert s == 201

    # the internal topic reaches the broker and no tenant lists it
    attempts = iter(range(1000))

    def ready():
        group = f"probe-{next(attempts)}"  # a fresh group each try: no leftover members
        s, d = hb(broker, group, ka, member_epoch=0, subscriptions=["orders"])
        if s == 200:
            hb(broker, group, ka, member_id=d["member_id"], member_epoch=-1)
        return s == 200 and len(d["assignment"]) == 2

    wait_for("the coordinator and the topic on the broker", ready, 30)
    s, topics = cp.api("GET", "topics/", key=ka)
    assert "__consumer_offsets" not in str(topics)
    s, meta = http("GET", f"{broker.url}/sluice/v1/metadata", key=ka)
    assert [t["name"] for t in meta["topics"]] == ["orders"]

    # same group name in two tenants: two groups
    for key in (ka, kb):
        for p in range(2):
            http(
                "POST",
                f"{broker.url}/v3/clusters/sluice-local/topics/orders/records",
                {"partition_id": p, "value": {"type": "STRING", "data": "x"}},
                key=key,
            )
    s, _ = http(
        "POST",
        f"{broker.url}/sluice/v1/groups/shared/offsets",
        {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]},
        key=ka,
    )
    assert s == 200
    s, err = http("GET", f"{broker.url}/sluice/v1/groups/shared", key=kb)
    assert s == 404 and err["error_code"] == "GROUP_ID_NOT_FOUND"
    s, listed = http("GET", f"{broker.url}/sluice/v1/groups", key=kb)
    assert [g["group_id"] for g in listed["groups"]] == []

    # the control plane's API (the console contract)
    s, groups = cp.api("GET", "groups/", key=ka)
    assert s == 200, groups
    assert [g["group_id"] for g in groups["results"]] == ["shared"]
    assert set(groups["results"][0]) == {
        "group_id",
        "type",
        "state",
        "members",
        "total_lag",
        "health",
    }
    assert (groups["results"][0]["type"], groups["results"][0]["state"]) == ("classic", "EMPTY")
    s, none = cp.api("GET", "groups/", key=kb)
    assert s == 200 and none["results"] == []
    s, d = cp.api("GET", "groups/shared/", key=ka)
    assert s == 200, d
    assert d["coordinator"] == 1 and d["members"] == []
    assert d["offsets"] == [
        {
            "topic": "orders",
            "partition": 0,
            "committed_offset": 1,
            "log_end_offset": 1,
            "lag": 0,
            "time_lag_ms": 0,
        }
    ]
    s, err = cp.api("GET", "groups/shared/", key=kb)
    assert s == 404 and err["error_code"] == "NOT_FOUND"

    body = {"topic": "orders", "partitions": None, "strategy": "earliest", "dry_run": True}
    s, dry = cp.api("POST", "groups/shared/reset-offsets", body, key=ka)
    assert s == 200 and dry["applied"] is False and dry["reset_id"] is None, dry
    assert dry["plan"] == [
        {"topic": "orders", "partition": 0, "current": 1, "target": 0, "delta": -1},
        {"topic": "orders", "partition": 1, "current": None, "target": 0, "delta": None},
    ]
    s, applied = cp.api("POST", "groups/shared/reset-offsets", {**body, "dry_run": False}, key=ka)
    assert s == 200 and applied["applied"] and applied["plan"] == dry["plan"]
    s, d = cp.api("GET", "groups/shared/", key=ka)
    assert [(r["partition"], r["committed_offset"]) for r in d["offsets"]] == [(0, 0), (1, 0)]
    s, undone = cp.api("POST", f"groups/shared/reset-offsets/{applied['reset_id']}/undo", key=ka)
    assert s == 200 and undone["applied"], undone
    s, d = cp.api("GET", "groups/shared/", key=ka)
    assert [(r["partition"], r["committed_offset"]) for r in d["offsets"]] == [(0, 1)]
    s, other = cp.api("POST", f"groups/shared/reset-offsets/{applied['reset_id']}/undo", key=kb)
    assert s == 404 and other["error_code"] == "NOT_FOUND"  # another tenant cannot name the reset
    s, audit = cp.api("GET", "audit", key=ka)
    actions = [e["action"] for e in audit.get("results", audit)]
    assert "group.reset_offsets" in actions and "group.reset_offsets_undo" in actions

    # a group with members: 409 GROUP_NOT_EMPTY
    s, m = hb(
        broker, "busy", ka, member_epoch=0, subscriptions=["orders"], session_timeout_ms=60000
    )
    s, d = cp.api("GET", "groups/busy/", key=ka)
    assert s == 200 and (d["type"], d["state"]) == ("consumer", "STABLE"), d
    assert [(x["member_id"], x["client_host"]) for x in d["members"]] == [
        (m["member_id"], "127.0.0.1")
    ]
    s, err = cp.api("POST", "groups/busy/reset-offsets", body, key=ka)
    assert s == 409 and err["error_code"] == "GROUP_NOT_EMPTY"
    s, err = cp.api("DELETE", "groups/busy/", key=ka)
    assert s == 409 and err["error_code"] == "GROUP_NOT_EMPTY"
    s, _ = http(
        "POST",
        f"{broker.url}/sluice/v1/groups/busy/offsets",
        {
            "member_id": m["member_id"],
            "member_epoch": m["member_epoch"],
            "offsets": [{"topic": "orders", "partition": 1, "offset": 1}],
        },
        key=ka,
    )
    assert s == 200
    hb(broker, "busy", ka, member_id=m["member_id"], member_epoch=-1)
    s, _ = cp.api("DELETE", "groups/busy/", key=ka)
    assert s == 204
    s, err = cp.api("GET", "groups/busy/", key=ka)
    assert s == 404
