"""Topic configs and consumer groups in the console, in headless Chromium against the real
stack (tests/e2e/configs_groups.e2e.mjs): the create form's replication factor is the
control plane's default (the one the CLI gets), typed config editors edit and reset, a
group's members show client id, host and assignments while a real consumer is in the group,
the empty group is deleted, and the audit log names the topic and the group and shows what
changed. Screenshots land in test-artifacts/console/configs-groups-*."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from .conftest import Stack, browse_script

TOPIC = "cg-orders"
GROUP = "cg-members"
CLIENT_ID = "cg-console-test"


def api(stack: Stack, path: str):
    req = urllib.request.Request(stack.url + path)
    req.add_header("Authorization", f"Bearer {stack.state['api_key']}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def group(stack: Stack) -> dict | None:
    status, doc = api(stack, f"/api/v1/groups/{GROUP}/")
    return doc if status == 200 else None


def produce(stack: Stack, partition: int) -> None:
    base = f"{stack.state['leader_url']}/v3/clusters/{stack.state['cluster_id']}"
    body = {"partition_id": partition, "value": {"type": "STRING", "data": "cg"}}
    req = urllib.request.Request(
        f"{base}/topics/{TOPIC}/records", data=json.dumps(body).encode(), method="POST"
    )
    req.add_header("Authorization", f"Bearer {stack.state['api_key']}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def wait_for(what: str, check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return result


def browse(stack: Stack, phase: str) -> str:
    out = browse_script(
        stack,
        "configs_groups.e2e.mjs",
        PHASE=phase,
        CG_TOPIC=TOPIC,
        CG_GROUP=GROUP,
        CG_CLIENT_ID=CLIENT_ID,
    )
    assert "FAIL" not in out and "done:" in out
    return out


def test_configs_members_group_delete_and_audit(stack: Stack):
    from brokernodes.client import GroupConsumer

    browse(stack, "configs")  # creates TOPIC (2 partitions) through the create form
    wait_for("the brokers to serve the new topic", lambda: _produced(stack))
    consumer = GroupConsumer(
        stack.state["brokers"],
        stack.state["api_key"],
        group_id=GROUP,
        topics=[TOPIC],
        client_id=CLIENT_ID,
        auto_offset_reset="earliest",
    )
    try:
        got: list = []

        def assigned() -> bool:  # both partitions assigned and both records read
            got.extend(consumer.poll(timeout=0.5))
            g = group(stack)
            return bool(
                len(got) >= 2 and g and g["members"] and len(g["members"][0]["assignments"]) == 2
            )

        wait_for("the consumer to be assigned both partitions", assigned)
        (member,) = group(stack)["members"]
        assert (member["client_id"], member["client_host"]) == (CLIENT_ID, "127.0.0.1"), member
        browse(stack, "members")
        consumer.commit()  # committed offsets: what deleting the group removes
    finally:
        consumer.close()  # leaves the group: it is empty and may be deleted
    wait_for("the group to be empty", lambda: (g := group(stack)) and g["members"] == [])
    browse(stack, "delete")
    assert group(stack) is None


def _produced(stack: Stack) -> bool:
    try:
        for partition in (0, 1):
            produce(stack, partition)
    except (urllib.error.URLError, AssertionError):
        return False
    return True
