"""The broker's group API over HTTP: heartbeats and fencing, zombie commits, bad input, offset
resets (dry run equals the applied result, undo restores), describe with lag, delete,
NOT_COORDINATOR, metrics."""

from __future__ import annotations

import time

import pytest

from tests.integration.groups.conftest import GROUP_TOPICS, http_json, start_cluster


@pytest.fixture(scope="module")
def api_broker(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    launcher = BrokerLauncher(tmp_path_factory.mktemp("groups-api"))
    try:
        b = launcher(GROUP_TOPICS)
        for i in range(30):  # orders-0..2 get 10 records each
            b.json(
                "POST",
                "/v3/clusters/test-cluster/topics/orders/records",
                {"partition_id": i % 3, "value": {"type": "STRING", "data": f"v{i}"}},
            )
        yield b
    finally:
        launcher.close()


def hb(b, group, **body):
    return http_json("POST", f"{b.url}/sluice/v1/groups/{group}/heartbeat", body, key=b.api_key)


def commit(b, group, offsets, **body):
    return http_json(
        "POST",
        f"{b.url}/sluice/v1/groups/{group}/offsets",
        {"offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets], **body},
        key=b.api_key,
    )


def test_zombie_commits_are_refused(api_broker):
    b = api_broker
    s, a = hb(b, "zombies", member_epoch=0, subscriptions=["orders"], session_timeout_ms=60000)
    assert s == 200 and a["member_epoch"] == 1 and len(a["assignment"]) == 3
    mid = a["member_id"]
    assert commit(b, "zombies", [("orders", 0, 3)], member_id=mid, member_epoch=1)[0] == 200
    # another member joins: the group epoch moves on; the first is still at epoch 1
    s, other = hb(b, "zombies", member_epoch=0, subscriptions=["orders"])
    s, again = hb(b, "zombies", member_id=mid, member_epoch=1, owned=a["assignment"])
    assert again["revoking"]  # asked to give some up
    # a commit from an epoch that is not the member's current one: STALE_MEMBER_EPOCH
    s, err = commit(b, "zombies", [("orders", 0, 4)], member_id=mid, member_epoch=0)
    assert s == 409 and err["error_code"] == "STALE_MEMBER_EPOCH"
    # a member that was removed (left) is a zombie: UNKNOWN_MEMBER_ID
    hb(b, "zombies", member_id=other["member_id"], member_epoch=-1)
    s, err = commit(b, "zombies", [("orders", 0, 4)], member_id=other["member_id"], member_epoch=2)
    assert s == 409 and err["error_code"] == "UNKNOWN_MEMBER_ID"
    # heartbeat with an epoch ahead of the coordinator's: FENCED_MEMBER_EPOCH
    s, err = hb(b, "zombies", member_id=mid, member_epoch=99)
    assert s == 409 and err["error_code"] == "FENCED_MEMBER_EPOCH"
    s, offs = http_json("GET", f"{b.url}/sluice/v1/groups/zombies/offsets", key=b.api_key)
    assert offs["offsets"] == [
        {"topic": "orders", "partition": 0, "offset": 3, "metadata": "", "leader_epoch": None}
    ]


@pytest.mark.parametrize(
    "body, code",
    [
        ({"member_epoch": 0, "subscriptions": "orders"}, "INVALID_REQUEST"),
        ({"subscriptions": ["orders"]}, "INVALID_REQUEST"),
        ({"member_epoch": 5, "member_id": "nobody"}, "UNKNOWN_MEMBER_ID"),
        ({"member_epoch": 0, "subscriptions": ["orders"], "assignor": "magic"}, "INVALID_REQUEST"),
        (
            {"member_epoch": 0, "subscriptions": ["orders"], "session_timeout_ms": 5},
            "INVALID_REQUEST",
        ),
    ],
)
def test_bad_heartbeats_get_clear_errors(api_broker, body, code):
    s, err = hb(api_broker, "bad-hb", **body)
    assert 400 <= s < 500 and err["error_code"] == code, err
    assert err["message"]


def test_bad_commits_get_clear_errors(api_broker):
    b = api_broker
    s, err = commit(b, "nobody-home", [("orders", 0, 1)], member_id="m", member_epoch=1)
    assert s == 404 and err["error_code"] == "GROUP_ID_NOT_FOUND"
    s, err = commit(b, "admin-commits", [("orders", 0, -1)])
    assert s == 400 and err["error_code"] == "INVALID_REQUEST"
    s, err = commit(b, "admin-commits", [("orders", 0, 11)])  # beyond the log end (10)
    assert s == 416 and err["error_code"] == "OFFSET_OUT_OF_RANGE"
    s, err = commit(b, "admin-commits", [("orders", 7, 1)])
    assert s == 404 and err["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    s, err = http_json("GET", f"{b.url}/sluice/v1/groups/never-was", key=b.api_key)
    assert s == 404 and err["error_code"] == "GROUP_ID_NOT_FOUND"


def test_reset_dry_run_equals_applied_and_undo_restores(api_broker):
    b = api_broker
    g = "resets"
    assert commit(b, g, [("orders", 0, 2), ("orders", 1, 5)])[0] == 200  # an admin commit
    url = f"{b.url}/sluice/v1/groups/{g}/reset-offsets"
    for strategy, value in [
        ("earliest", None),
        ("latest", None),
        ("offset", 7),
        ("shift-by", -1),
        ("by-duration", "PT1H"),
        ("datetime", int(time.time() * 1000) + 3_600_000),
    ]:
        spec = {"topic": "orders", "partitions": [0, 1], "strategy": strategy, "value": value}
        s, before = http_json("GET", f"{b.url}/sluice/v1/groups/{g}/offsets", key=b.api_key)
        s, dry = http_json("POST", url, {**spec, "dry_run": True}, key=b.api_key)
        assert s == 200 and dry["applied"] is False, dry
        s, after_dry = http_json("GET", f"{b.url}/sluice/v1/groups/{g}/offsets", key=b.api_key)
        assert after_dry == before  # a dry run changes nothing
        s, applied = http_json("POST", url, {**spec, "dry_run": False}, key=b.api_key)
        assert s == 200 and applied["applied"] is True
        assert applied["plan"] == dry["plan"], strategy
        s, now = http_json("GET", f"{b.url}/sluice/v1/groups/{g}/offsets", key=b.api_key)
        got = {(o["topic"], o["partition"]): o["offset"] for o in now["offsets"]}
        for row in dry["plan"]:
            assert got[(row["topic"], row["partition"])] == row["target"]
            assert row["delta"] == row["target"] - row["current"]
    # undo: put back the previous offsets of the last reset
    undo = {
        "strategy": "offsets",
        "offsets": [
            {"topic": r["topic"], "partition": r["partition"], "offset": r["current"]}
            for r in applied["plan"]
        ],
        "dry_run": False,
    }
    s, undone = http_json("POST", url, undo, key=b.api_key)
    assert s == 200 and undone["applied"]
    s, now = http_json("GET", f"{b.url}/sluice/v1/groups/{g}/offsets", key=b.api_key)
    got = {(o["topic"], o["partition"]): o["offset"] for o in now["offsets"]}
    assert got == {(r["topic"], r["partition"]): r["current"] for r in applied["plan"]}


def test_reset_refused_while_group_has_members(api_broker):
    b = api_broker
    s, a = hb(b, "busy", member_epoch=0, subscriptions=["orders"], session_timeout_ms=60000)
    s, err = http_json(
        "POST",
        f"{b.url}/sluice/v1/groups/busy/reset-offsets",
        {"topic": "orders", "strategy": "earliest", "dry_run": True},
        key=b.api_key,
    )
    assert s == 409 and err["error_code"] == "NON_EMPTY_GROUP"
    s, err = http_json("DELETE", f"{b.url}/sluice/v1/groups/busy", key=b.api_key)
    assert s == 409 and err["error_code"] == "NON_EMPTY_GROUP"
    assert commit(b, "busy", [("orders", 0, 1)], member_id=a["member_id"], member_epoch=1)[0] == 200
    hb(b, "busy", member_id=a["member_id"], member_epoch=-1)
    s, _ = http_json("DELETE", f"{b.url}/sluice/v1/groups/busy", key=b.api_key)
    assert s == 204
    s, err = http_json("GET", f"{b.url}/sluice/v1/groups/busy", key=b.api_key)
    assert s == 404


def test_describe_lag_and_metrics(api_broker):
    b = api_broker
    assert commit(b, "laggy", [("orders", 0, 4), ("orders", 2, 10)])[0] == 200
    s, d = http_json("GET", f"{b.url}/sluice/v1/groups/laggy", key=b.api_key)
    assert s == 200
    rows = {(r["topic"], r["partition"]): r for r in d["offsets"]}
    assert rows[("orders", 0)]["lag"] == 6 and rows[("orders", 0)]["log_end_offset"] == 10
    assert rows[("orders", 0)]["time_lag_ms"] >= 0
    assert rows[("orders", 2)]["lag"] == 0 and rows[("orders", 2)]["time_lag_ms"] == 0
    assert d["total_lag"] == 6 and d["health"] == "STOP"
    s, listed = http_json("GET", f"{b.url}/sluice/v1/groups", key=b.api_key)
    assert any(g["group_id"] == "laggy" and g["total_lag"] == 6 for g in listed["groups"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _, _, body = b.request("GET", "/metrics")
        if b'sluice_group_lag{group="laggy",partition="0",topic="orders"} 6.0' in body:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("no sluice_group_lag for laggy in /metrics")


def test_not_coordinator_names_the_coordinator(broker_factory):
    cluster = start_cluster(broker_factory, GROUP_TOPICS)
    key = cluster[0].api_key
    s, c = http_json("GET", cluster[0].url + "/sluice/v1/groups/nc/coordinator", key=key)
    others = [b for b in cluster if b.url != c["url"]]
    s, err = http_json(
        "POST",
        others[0].url + "/sluice/v1/groups/nc/heartbeat",
        {"member_epoch": 0, "subscriptions": ["orders"]},
        key=key,
    )
    assert s == 421 and err["error_code"] == "NOT_COORDINATOR"
    assert err["coordinator_url"] == c["url"] and err["coordinator_id"] == c["coordinator_id"]
    # the coordinator computes lag for partitions other brokers lead; a record sent to a
    # broker that does not lead its partition is forwarded to the leader ("One front door")
    s, _ = http_json(
        "POST",
        cluster[0].url + "/v3/clusters/test-cluster/topics/orders/records",
        {"partition_id": 1, "value": {"type": "STRING", "data": "x"}},
        key=key,
    )
    assert s == 200
    leader_of_1 = cluster[1]  # partition i is led by broker i % 3 + 1
    s, _ = http_json(
        "POST",
        leader_of_1.url + "/v3/clusters/test-cluster/topics/orders/records",
        {"partition_id": 1, "value": {"type": "STRING", "data": "y"}},
        key=key,
    )
    s, _ = http_json(
        "POST",
        c["url"] + "/sluice/v1/groups/nc/offsets",
        {"offsets": [{"topic": "orders", "partition": 1, "offset": 0}]},
        key=key,
    )
    assert s == 200
    s, d = http_json("GET", c["url"] + "/sluice/v1/groups/nc", key=key)
    assert [r["lag"] for r in d["offsets"]] == [2], d
    assert d["offsets"][0]["time_lag_ms"] >= 0
