"""``sluice topics create|alter|add-partitions|delete`` and ``sluice acls`` against a real
control plane, and the brokers serving what they create; the SDK's ``Admin.create_topic``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from brokernodes.client.admin import Admin
from brokernodes.client.control import ControlPlane as ControlPlaneClient
from brokernodes.client.control import ControlPlaneError

from .conftest import ControlPlane, http, wait_for


def sluice(cp: ControlPlane, broker_url: str, key: str, *args: str, stdin: str | None = None):
    env = {
        **os.environ,
        "SLUICE_URL": broker_url,
        "SLUICE_API_KEY": key,
        "SLUICE_CONTROL_PLANE_URL": cp.url,
    }
    return subprocess.run(
        [sys.executable, "-m", "brokernodes.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_cli_manages_topics_and_acls_through_the_control_plane(control_plane: ControlPlane):
    cp = control_plane
    tenant = cp.tenant("cli")
    key = tenant["api_key"]
    broker = cp.start_broker(1)

    # a dry run changes nothing; a bad config is refused with its field error
    dry = sluice(cp, broker.url, key, "topics", "create", "clicks", "--validate-only")
    assert dry.returncode == 0 and "would create topic clicks" in dry.stdout, dry.stderr
    bad = sluice(cp, broker.url, key, "topics", "create", "clicks", "--config", "retention.ms=soon")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr, bad.stderr
    assert "retention.ms" in bad.stderr
    usage = sluice(cp, broker.url, key, "topics", "create", "clicks", "--config", "novalue")
    assert usage.returncode == 2 and "NAME=VALUE" in usage.stderr

    made = sluice(
        cp,
        broker.url,
        key,
        "topics",
        "create",
        "clicks",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
        "--format",
        "json",
    )
    assert made.returncode == 0, made.stderr
    topic = json.loads(made.stdout)
    assert topic["partitions"] == 2 and topic["configs"]["retention.ms"] == "3600000"

    # the broker learns it from the metadata log; produce and consume with the CLI
    def listed():
        r = sluice(cp, broker.url, key, "topics", "list", "--format", "json")
        return r.returncode == 0 and {t["name"]: t for t in json.loads(r.stdout)}.get("clicks")

    assert wait_for("the broker to serve the topic", listed)["partitions"] == 2
    produced = sluice(
        cp, broker.url, key, "produce", "clicks", "--partition", "0", stdin="one\ntwo\n"
    )
    assert produced.returncode == 0, produced.stderr
    status, body = http(
        "GET",
        f"{broker.url}/sluice/v1/topics/clicks/partitions/0/records?offset=0&format=text",
        key=key,
    )
    assert status == 200 and [r["value"] for r in body["records"]] == ["one", "two"]

    altered = sluice(
        cp, broker.url, key, "topics", "alter", "clicks", "--config", "retention.ms=7200000"
    )
    assert altered.returncode == 0 and "retention.ms=7200000" in altered.stdout, altered.stderr
    grown = sluice(cp, broker.url, key, "topics", "add-partitions", "clicks", "--partitions", "3")
    assert grown.returncode == 0 and "3 partitions" in grown.stdout, grown.stderr
    assert wait_for("the third partition", lambda: (listed() or {}).get("partitions") == 3)

    # ACLs: create, list, delete
    created = sluice(
        cp,
        broker.url,
        key,
        "acls",
        "create",
        "--principal",
        "User:reader",
        "--resource-type",
        "TOPIC",
        "--resource-name",
        "click",
        "--pattern-type",
        "PREFIXED",
        "--operation",
        "READ",
        "--format",
        "json",
    )
    assert created.returncode == 0, created.stderr
    acl_id = json.loads(created.stdout)["id"]
    listing = sluice(cp, broker.url, key, "acls", "list", "--principal", "User:reader")
    assert acl_id in listing.stdout and "ALLOW User:reader from *: READ on TOPIC 'click'" in (
        listing.stdout
    )
    assert sluice(cp, broker.url, key, "acls", "delete", acl_id).returncode == 0
    assert "no ACLs match" in sluice(cp, broker.url, key, "acls", "list").stdout

    deleted = sluice(cp, broker.url, key, "topics", "delete", "clicks")
    assert deleted.returncode == 0, deleted.stderr
    wait_for("the broker to drop the topic", lambda: not listed())
    missing = sluice(cp, broker.url, key, "topics", "delete", "clicks")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr

    # a wrong key is refused by the control plane with its own code
    denied = sluice(cp, broker.url, "slk_nope.nope", "topics", "create", "x")
    assert denied.returncode == 1 and "NOT_AUTHENTICATED" in denied.stderr


def test_sdk_admin_creates_and_deletes_topics(control_plane: ControlPlane):
    cp = control_plane
    key = cp.tenant("sdk")["api_key"]
    broker = cp.start_broker(1)
    with Admin(broker.url, key, control_plane_url=cp.url) as admin:
        topic = admin.create_topic("events", 3, 1, **{"cleanup.policy": "compact"})
        assert topic["partitions"] == 3 and topic["configs"]["cleanup.policy"] == "compact"
        described = wait_for(
            "the broker to learn the topic",
            lambda: next((t for t in admin.list_topics() if t.name == "events"), None),
        )
        assert described.num_partitions == 3
        admin.delete_topic("events")
    client = ControlPlaneClient(cp.url, key)
    try:
        client.describe_topic("events")
    except ControlPlaneError as e:
        assert e.status == 404 and e.error_code == "NOT_FOUND"
    else:
        raise AssertionError("the deleted topic is still described")
    try:
        client.create_topic("bad name!", 1)
    except ControlPlaneError as e:
        assert e.status == 400 and "name" in e.fields, e
    else:
        raise AssertionError("an invalid name was accepted")
