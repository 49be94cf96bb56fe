"""The controller as processes: ``manage.py run_controller`` beside a real control plane and
real brokers. One controller is active at a time; a standby takes over with a higher epoch
when the active one is killed; a killed broker is fenced and its leaderships move, which
the brokers see in the metadata log. (Whether records replicate is the broker side's; here
the controller's guarantees are asserted: leaders, leader epochs and ISRs.)"""

from __future__ import annotations

import pytest

from .conftest import FAST_FAILOVER_ENV, ControlPlane, http, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def control_plane_env() -> dict[str, str]:
    # a little slacker than the fault suite's, so a loaded machine's late heartbeat does not
    # fence a healthy broker in the middle of an assertion
    return {
        **FAST_FAILOVER_ENV,
        "SLUICE_BROKER_SESSION_TIMEOUT_S": "4",
    }


def test_standby_takes_over_with_a_higher_epoch(control_plane: ControlPlane):
    cp = control_plane
    procs = {"c1": cp.start_controller("c1")}
    first = cp.wait_controller()
    assert first["controller_id"] == "c1"
    for name in ("c2", "c3", "c4"):  # three standbys contend for every takeover
        procs[name] = cp.start_controller(name)
    for name in ("c2", "c3", "c4"):
        wait_for(f"{name} to start", lambda n=name: "started" in procs[n].output(), 30)
    assert cp.controller_status()["controller_id"] == "c1"  # the active one keeps renewing

    procs.pop("c1").kill()  # SIGKILL: the lease lapses after SLUICE_CONTROLLER_LEASE_S
    second = cp.wait_controller(epoch_above=first["epoch"], timeout=20)
    assert second["controller_id"] in procs and second["epoch"] == first["epoch"] + 1

    # a clean stop releases the lease: a standby takes over without waiting for it to lapse
    stopped = procs.pop(second["controller_id"])
    stopped.stop()
    assert stopped.proc is not None and stopped.proc.returncode == 0
    assert "released the lease" in stopped.output()
    third = cp.wait_controller(epoch_above=second["epoch"], timeout=10)
    assert third["controller_id"] in procs

    # a paused controller is deposed; resumed, it finds the lease gone and writes nothing
    paused = procs[third["controller_id"]]
    paused.pause()
    fourth = cp.wait_controller(epoch_above=third["epoch"], timeout=20)
    assert fourth["controller_id"] in procs and fourth["controller_id"] != third["controller_id"]
    paused.resume()
    wait_for("the resumed controller to notice", lambda: "lost the lease" in paused.output(), 10)
    status = cp.controller_status()
    assert (status["controller_id"], status["epoch"]) == (fourth["controller_id"], fourth["epoch"])

    # every takeover is in the metadata log: the latest names the active controller
    status, body = cp.internal("GET", "metadata?since=0")
    assert status == 200
    (rec,) = [r for r in body["records"] if r["kind"] == "controller"]
    assert rec["value"] == {"controller_id": fourth["controller_id"], "epoch": fourth["epoch"]}


def test_killed_leader_is_fenced_and_leadership_moves(control_plane: ControlPlane):
    cp = control_plane
    cp.start_controller("c1")
    cp.wait_controller()
    brokers = {i: cp.start_broker(i) for i in (1, 2, 3)}
    tenant = cp.tenant("ctl")
    status, topic = cp.api(
        "POST",
        "topics/",
        {"name": "failover", "partitions": 3, "replication_factor": 3},
        key=tenant["api_key"],
    )
    assert status == 201, topic
    topic_id = topic["topic_id"]
    before = cp.topic_record(topic_id)
    assert before is not None
    p0 = before["partitions"][0]
    assert sorted(p0["replicas"]) == [1, 2, 3] and sorted(p0["isr"]) == [1, 2, 3]
    victim = p0["leader"]
    led_by_victim = [p["partition"] for p in before["partitions"] if p["leader"] == victim]

    brokers[victim].kill()

    def moved():
        rec = cp.topic_record(topic_id)
        parts = rec["partitions"] if rec else []
        ok = all(
            parts[p]["leader"] not in (victim, -1)
            and parts[p]["leader_epoch"] > before["partitions"][p]["leader_epoch"]
            and victim not in parts[p]["isr"]
            for p in led_by_victim
        )
        return rec if ok else None

    after = wait_for("leadership to move off the killed broker", moved, timeout=20)
    for p in after["partitions"]:
        assert victim not in p["isr"]  # fenced: out of every ISR
        assert p["partition_epoch"] > 0

    # the surviving brokers learned the new leader from the metadata log
    survivor = next(b for i, b in brokers.items() if i != victim)
    new_leader = after["partitions"][led_by_victim[0]]["leader"]

    def broker_knows():
        status, meta = http("GET", survivor.url + "/sluice/v1/metadata", key=tenant["api_key"])
        for t in meta.get("topics", []) if status == 200 else []:
            if t["name"] == "failover":
                return t["partitions"][led_by_victim[0]]["leader"] == new_leader
        return False

    wait_for("a broker to see the new leader", broker_knows, timeout=15)

    # the control plane reports the partitions as under-replicated, to operators and tenant
    def reported():
        status, body = cp.internal("GET", "partitions?state=under_replicated")
        assert status == 200
        ops = {p["partition"] for p in body["partitions"] if p["topic_id"] == topic_id}
        status, body = cp.api(
            "GET", "cluster/partitions?state=under_replicated", key=tenant["api_key"]
        )
        assert status == 200, body
        tenant_view = {p["partition"] for p in body["partitions"]}
        status, body = cp.api("GET", "topics/failover", key=tenant["api_key"])
        assert status == 200
        details = body["partition_details"]
        return ops == tenant_view == {0, 1, 2} and all(
            p["under_replicated"] and not p["offline"] for p in details
        )

    wait_for("the partitions to be reported under-replicated", reported, timeout=10)

    # the broker comes back: it registers again (new broker epoch) and is unfenced
    brokers[victim].start()
    brokers[victim].wait_ready()

    def unfenced():
        _status, body = cp.internal("GET", "controller")
        states = {b["broker_id"]: b for b in body["brokers"]}
        return states[victim]["live"] and not states[victim]["fenced"]

    wait_for("the restarted broker to be unfenced", unfenced, timeout=20)

    # a paused leader (SIGSTOP past the session) is fenced and loses its leaderships; resumed,
    # it is unfenced by its own heartbeat once it has pulled the record that fenced it
    rec = cp.topic_record(topic_id)
    paused = rec["partitions"][0]["leader"]
    epoch0 = rec["partitions"][0]["leader_epoch"]
    brokers[paused].pause()

    def moved_off_paused():
        p0 = cp.topic_record(topic_id)["partitions"][0]
        return p0["leader"] not in (paused, -1) and p0["leader_epoch"] > epoch0

    wait_for("leadership to move off the paused broker", moved_off_paused, timeout=20)
    brokers[paused].resume()

    def paused_unfenced():
        states = {b["broker_id"]: b for b in cp.internal("GET", "controller")[1]["brokers"]}
        return not states[paused]["fenced"] and states[paused]["live"]

    wait_for("the resumed broker to be unfenced", paused_unfenced, timeout=20)
