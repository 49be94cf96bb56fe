"""A group's members as the control plane describes them (client id, host, assigned
partitions, from the coordinator broker), Kafka's DeleteGroups semantics through the
control plane (409 GROUP_NOT_EMPTY with a member, 204 once empty), and the audit event
naming the group and keeping the committed offsets the deletion removed."""

from __future__ import annotations

import pytest

from tests.integration.control_plane.conftest import (
    ControlPlane,
    http,
    start_control_plane,
    wait_for,
)

GROUP = "members-delete"


@pytest.fixture
def control_plane(tmp_path):
    with start_control_plane(tmp_path) as cp:
        yield cp


def hb(broker, key: str, **body):
    return http("POST", f"{broker.url}/sluice/v1/groups/{GROUP}/heartbeat", body, key=key)


def test_members_delete_and_audit(control_plane: ControlPlane):
    cp = control_plane
    key = cp.tenant("alpha")["api_key"]
    broker = cp.start_broker(1)
    status, _ = cp.api("POST", "topics/", {"name": "ledger", "partitions": 2}, key=key)
    assert status == 201

    joined: dict = {}

    def join() -> bool:  # until the broker has the topic and assigns both partitions
        s, d = hb(
            broker,
            key,
            member_id=joined.get("member_id"),
            member_epoch=joined.get("member_epoch", 0),
            subscriptions=["ledger"],
            client_id="ledger-reader",
            session_timeout_ms=60000,
        )
        if s == 200:
            joined.update(d)
        return s == 200 and len(d.get("assignment") or []) == 2

    wait_for("both partitions assigned", join, 30)
    s, d = cp.api("GET", f"groups/{GROUP}/", key=key)
    assert s == 200, d
    (member,) = d["members"]
    assert member["member_id"] == joined["member_id"]
    assert (member["client_id"], member["client_host"]) == ("ledger-reader", "127.0.0.1")
    assert sorted((a["topic"], a["partition"]) for a in member["assignments"]) == [
        ("ledger", 0),
        ("ledger", 1),
    ]

    # a commit by the member, then DeleteGroups while it is in the group: refused
    s, _ = http(
        "POST",
        f"{broker.url}/sluice/v1/groups/{GROUP}/offsets",
        {
            "member_id": joined["member_id"],
            "member_epoch": joined["member_epoch"],
            "offsets": [{"topic": "ledger", "partition": 1, "offset": 0}],
        },
        key=key,
    )
    assert s == 200
    s, err = cp.api("DELETE", f"groups/{GROUP}/", key=key)
    assert s == 409 and err["error_code"] == "GROUP_NOT_EMPTY", err
    assert err["message"]

    # the member leaves: the empty group is deleted, with its offsets
    hb(broker, key, member_id=joined["member_id"], member_epoch=-1)
    s, _ = cp.api("DELETE", f"groups/{GROUP}/", key=key)
    assert s == 204
    s, err = cp.api("GET", f"groups/{GROUP}/", key=key)
    assert s == 404, err
    s, audit = cp.api("GET", "audit?action=group.delete", key=key)
    (event,) = audit["results"]
    assert (event["object_id"], event["object_name"]) == (GROUP, GROUP)
    assert event["before"]["committed_offsets"] == {"ledger/1": 0}
    assert {"field": "committed_offsets.ledger/1", "before": 0, "after": None} in event["changes"]
