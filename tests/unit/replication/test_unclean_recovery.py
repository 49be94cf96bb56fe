"""Unclean recovery (KIP-966's balanced strategy) in the pure controller core: when every
ISR/ELR member restarted uncleanly, the partition waits for all of them (the last known ELR)
to be back and report their logs, then elects the longest; never a replica outside them
unless the topic enables unclean leader election."""

from __future__ import annotations

import time
from dataclasses import replace

from brokernodes.records.batch import Record, encode_batch
from brokernodes.replication import controller as ctl
from brokernodes.replication import errors
from brokernodes.replication.leader import AlterPartitionRequest
from brokernodes.server.metadata.client import offline_replica_logs
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.replica.partition import Partition

Reg = ctl.PartitionRegistration
Log = ctl.ReplicaLog


def view(*live, shutting_down=()):
    return ctl.BrokerView(frozenset(live), {b: 10 + b for b in range(6)}, frozenset(shutting_down))


def crashed_everywhere(min_isr: int) -> Reg:
    """RF 3 led by 0; every broker killed (fenced in turn), then restarted uncleanly."""
    r = Reg((0, 1, 2), (0, 1, 2), 0, 3, 8)
    live = {0, 1, 2}
    for b in (0, 1, 2):
        live.discard(b)
        e = ctl.fence_broker(r, b, view(*live), min_isr=min_isr)
        assert e is not None
        r = e.registration
    assert r.offline and r.isr == () and r.elr  # the last ISR members are kept as the ELR
    for b in (0, 1, 2):
        new = ctl.unclean_restart(r, b)
        if new is not None:
            r = new
    return r


def test_unclean_restart_of_every_eligible_replica_keeps_them_as_last_known_elr():
    for min_isr, expected in ((1, (2,)), (2, (1, 2))):
        r = crashed_everywhere(min_isr)
        assert r.isr == () and r.elr == () and r.leader == ctl.NO_LEADER
        # only the replicas that held every committed record: those fenced last
        assert r.last_known_elr == expected


def test_recovery_waits_until_every_last_known_elr_member_is_back_and_reported():
    r = crashed_everywhere(2)  # last known ELR (1, 2)
    logs = {1: Log(5, 100), 2: Log(5, 120)}
    # 2 not back yet (or back but fenced): wait, even though 1 reported
    assert ctl.recover_leader(r, view(0, 1), logs) is None
    assert ctl.recovery_waits_for(r, view(0, 1), logs) == (2,)
    assert ctl.elect_offline(r, view(0, 1), logs=logs) is None
    # back but shutting down: not eligible yet
    assert ctl.elect_offline(r, view(0, 1, 2, shutting_down=(2,)), logs=logs) is None
    # every member back, one report missing: wait for it
    assert ctl.elect_offline(r, view(0, 1, 2), logs={1: Log(5, 100)}) is None
    assert ctl.recovery_waits_for(r, view(0, 1, 2), {1: Log(5, 100)}) == (2,)
    e = ctl.elect_offline(r, view(0, 1, 2), logs=logs)
    assert e is not None and e.recovered and not e.unclean and e.leader == 2
    new = e.registration
    assert new.isr == (2,) and new.elr == () and new.last_known_elr == ()
    assert new.leader_epoch == r.leader_epoch + 1
    assert new.partition_epoch == r.partition_epoch + 1


def test_the_longest_log_is_the_highest_last_leader_epoch_then_the_largest_log_end():
    r = crashed_everywhere(2)
    # 1 wrote more under an older epoch (uncommitted, truncated later); 2 holds the newer one
    e = ctl.recover_leader(r, view(0, 1, 2), {1: Log(4, 500), 2: Log(5, 120)})
    assert e is not None and e.leader == 2
    e = ctl.recover_leader(r, view(0, 1, 2), {1: Log(5, 121), 2: Log(5, 120)})
    assert e is not None and e.leader == 1
    # a tie goes to replica order (the preferred replica first)
    e = ctl.recover_leader(r, view(0, 1, 2), {1: Log(5, 120), 2: Log(5, 120)})
    assert e is not None and e.leader == 1
    # an empty log reports epoch -1, offset 0
    e = ctl.recover_leader(r, view(0, 1, 2), {1: Log(-1, 0), 2: Log(3, 7)})
    assert e is not None and e.leader == 2


def test_never_a_replica_outside_the_last_known_elr_unless_unclean_is_enabled():
    r = crashed_everywhere(2)  # last known ELR (1, 2); 0 left the ISR while it was full
    logs = {0: Log(9, 10_000), 1: Log(5, 100)}  # 0 claims a longer log: not a candidate
    assert ctl.elect_offline(r, view(0, 1), logs=logs) is None
    e = ctl.elect_offline(r, view(0, 1, 2), logs={**logs, 2: Log(5, 100)})
    assert e is not None and e.leader == 1 and e.recovered
    # opted in and the last known ELR cannot all be waited for: any live replica, unclean
    e = ctl.elect_offline(r, view(0), logs=logs, unclean_enabled=True)
    assert e is not None and e.leader == 0 and e.unclean and not e.recovered


def test_a_clean_candidate_is_preferred_and_stops_the_recovery():
    # 1 came back uncleanly, 2 is still an ELR member: it may come back cleanly, so wait
    r = Reg((0, 1, 2), (), ctl.NO_LEADER, 5, 9, elr=(2,), last_known_elr=(1,))
    assert ctl.recover_leader(r, view(0, 1), {1: Log(5, 100)}) is None
    assert ctl.elect_offline(r, view(0, 1), logs={1: Log(5, 100)}) is None
    e = ctl.elect_offline(r, view(0, 1, 2), logs={1: Log(5, 100)})
    assert e is not None and e.leader == 2 and e.from_elr and not e.recovered
    assert e.registration.last_known_elr == ()  # a leader with every committed record


def test_restarts_before_fencing_elect_within_the_isr_until_the_last_one():
    """Brokers killed and restarted faster than their session: each unclean registration
    takes its broker out of the ISR; the controller elects from what is left, then recovers
    the last one (which held every committed record: it was in the ISR throughout)."""
    r = Reg((0, 1, 2), (0, 1, 2), 0, 3, 8)
    r = ctl.unclean_restart(r, 0)
    assert r.leader == ctl.NO_LEADER and r.isr == (1, 2) and r.last_known_elr == (0,)
    e = ctl.elect_offline(r, view(0, 1, 2))  # 1 and 2 look alive (session not expired)
    assert e is not None and e.leader == 1 and e.registration.last_known_elr == ()
    r = ctl.unclean_restart(e.registration, 1)
    e = ctl.elect_offline(r, view(0, 1, 2))
    assert e is not None and e.leader == 2
    r = ctl.unclean_restart(e.registration, 2)
    assert r.isr == () and r.elr == () and r.last_known_elr == (2,)
    e = ctl.elect_offline(r, view(0, 1, 2), logs={0: Log(3, 99), 2: Log(5, 50)})
    assert e is not None and e.leader == 2 and e.recovered


def test_a_working_leaders_isr_change_clears_the_last_known_elr():
    # 2 restarted uncleanly while 0 kept leading; it catches up and 0 adds it back
    r = ctl.unclean_restart(Reg((0, 1, 2), (0, 1, 2), 0, 3, 8), 2)
    assert r.last_known_elr == (2,) and r.leader == 0
    req = AlterPartitionRequest(0, 3, r.partition_epoch, ((0, 10), (1, 11), (2, 12)))
    res = ctl.alter_partition(r, req, view(0, 1, 2), min_isr=2)
    assert res.error == errors.NONE
    assert res.registration.isr == (0, 1, 2) and res.registration.last_known_elr == ()


def test_a_repeated_unclean_restart_of_a_last_known_member_changes_nothing():
    r = crashed_everywhere(2)
    assert ctl.unclean_restart(r, 1) is None
    assert ctl.unclean_restart(r, 0) is None


def test_reassignment_keeps_the_last_known_elr_within_the_replicas():
    r = Reg((0, 1, 2), (), ctl.NO_LEADER, 5, 9, last_known_elr=(1, 2))
    started = ctl.start_reassignment(r, (0, 1, 3))
    assert started.last_known_elr == (1, 2)  # 2 is only leaving, still a replica
    cancelled = ctl.cancel_reassignment(started)
    assert cancelled is not None and cancelled.last_known_elr == (1, 2)


def test_offline_reason_says_what_brings_the_partition_back():
    r = crashed_everywhere(2)  # last known ELR (1, 2)
    reason = ctl.offline_reason(r, view(0, 1), {1: Log(5, 100)})
    assert "unclean recovery waits for brokers 2 " in reason and "brokers 1, 2" in reason
    reason = ctl.offline_reason(r, view(0, 1, 2), {1: Log(5, 100), 2: Log(5, 1)})
    assert "reported its log" in reason
    elr = Reg((0, 1, 2), (), ctl.NO_LEADER, 5, 9, elr=(2, 0))
    assert "(brokers 0, 2) to come back" in ctl.offline_reason(elr, view(1))
    lost = Reg((0, 1, 2), (), ctl.NO_LEADER, 5, 9)
    assert "unclean.leader.election.enable=true" in ctl.offline_reason(lost, view(0, 1, 2))
    assert "any replica" in ctl.offline_reason(lost, view(), unclean_enabled=True)
    assert "not placed" in ctl.offline_reason(Reg((), (), ctl.NO_LEADER), view())


def test_a_broker_reports_the_logs_of_the_partitions_it_sees_offline(tmp_path):
    """The heartbeat's ``replica_logs``: last leader epoch and log end of each hosted
    partition without a leader, from the real partition and its log; nothing for a led one."""

    def partition(n: int, leader_epoch: int) -> Partition:
        info = PartitionInfo("t", n, 1, leader_epoch, (1, 2, 3), (1, 2, 3), "topic-id")
        log, state = Partition.open_log(str(tmp_path / f"t-{n}"), info, None, fsync=False)
        p = Partition(info, log, 1, state, min_insync_replicas=2, replica_lag_time_max_ms=30_000)
        now = int(time.time() * 1000)
        records = [Record(now, None, b"v%d" % i) for i in range(3 + n)]
        p.log.append(bytearray(encode_batch(records)), leader_epoch=leader_epoch)
        return p

    led, offline, empty = partition(0, 4), partition(1, 6), partition(2, 0)
    for p in (offline, empty):
        p.apply_metadata(replace(p.info, leader=ctl.NO_LEADER), min_insync_replicas=2)
    empty.log.truncate_to(0)
    reports = offline_replica_logs([led, offline, empty])
    assert reports[0] == {
        "topic_id": "topic-id",
        "partition": 1,
        "last_leader_epoch": 6,
        "log_end_offset": 4,
    }
    assert [r["partition"] for r in reports] == [1, 2]
    assert reports[1]["log_end_offset"] == 0
    for p in (led, offline, empty):
        p.log.close()
