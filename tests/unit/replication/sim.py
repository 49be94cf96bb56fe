"""An in-memory replicated partition driven by the replication state machines.

Three replicas hold logs as lists of ``(offset, epoch, value)`` and epoch entries as the
storage cache keeps them. Metadata reaches the brokers at once (the controller's decisions are
applied to every broker in the same step); AlterPartition requests are queued and answered
later, so pending-ISR windows occur. ``check()`` asserts the invariants after every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brokernodes.replication import controller as ctl
from brokernodes.replication import errors
from brokernodes.replication.follower import FollowerPhase, FollowerState, out_of_range_decision
from brokernodes.replication.leader import (
    AckStatus,
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderState,
)
from brokernodes.storage import leader_epoch as le

Record = tuple[int, int, int]  # (offset, epoch, value)


@dataclass
class Replica:
    id: int
    log: list[Record] = field(default_factory=list)
    entries: list[le.EpochEntry] = field(default_factory=list)
    flushed: int = 0
    alive: bool = True
    paused: bool = False
    broker_epoch: int = 1
    hw: int = 0
    leader: LeaderState | None = None
    follower: FollowerState | None = None

    @property
    def leo(self) -> int:
        return len(self.log)

    def truncate_to(self, offset: int) -> None:
        """As ``PartitionLog.truncate_to``: at the log end too, an epoch starting there goes."""
        if offset <= self.leo:
            del self.log[offset:]
            kept = le.truncate_from_end(self.entries, offset)
            if kept is not None:  # [] too: a log cut to its start keeps no epoch
                self.entries = kept
        self.flushed = min(self.flushed, self.leo)
        self.hw = min(self.hw, self.leo)

    def append(self, records: list[Record]) -> None:
        for rec in records:
            off, epoch, _ = rec
            assert off == self.leo
            self.entries = le.assign(self.entries, epoch, off) or self.entries
            self.log.append(rec)


class Violation(AssertionError):
    pass


class Cluster:
    def __init__(self, *, n: int = 3, min_isr: int = 2, unclean: bool = False, lag_ms: int = 100):
        self.min_isr = min_isr
        self.unclean = unclean
        self.lag_ms = lag_ms
        self.now = 0
        self.values = 0
        self.replicas = [Replica(i) for i in range(n)]
        ids = tuple(range(n))
        self.reg = ctl.PartitionRegistration(replicas=ids, isr=ids, leader=NO_LEADER)
        self.queue: list[tuple[LeaderState, AlterPartitionRequest]] = []
        self.outstanding: list[tuple[LeaderState, list[Record]]] = []
        self.acked: dict[int, Record] = {}
        self.committed: dict[int, Record] = {}
        self.hw_seen: tuple[LeaderState | None, int] = (None, 0)
        self.unclean_elections = 0
        self.elections = 0
        self.counts = {"acks_all": 0, "not_enough_replicas": 0, "after_append": 0, "dropped": 0}
        first = ctl.elect_leader(self.reg, self.brokers)
        assert first is not None
        self.apply(first.registration)

    # --- controller side -------------------------------------------------------------------

    @property
    def brokers(self) -> ctl.BrokerView:
        live = frozenset(r.id for r in self.replicas if r.alive and not r.paused)
        return ctl.BrokerView(live, {r.id: r.broker_epoch for r in self.replicas})

    @property
    def leader(self) -> Replica | None:
        if self.reg.leader == NO_LEADER:
            return None
        return self.replicas[self.reg.leader]

    def apply(self, new: ctl.PartitionRegistration, *, unclean: bool = False) -> None:
        """The controller commits ``new``; every live broker learns it at once."""
        old = self.reg
        self.reg = new
        ineligible = frozenset(r for r in new.replicas if not self.brokers.eligible(r))
        if new.leader_epoch != old.leader_epoch:
            if new.leader != NO_LEADER:
                self.elections += 1
                self.unclean_elections += unclean
                if not unclean and new.leader not in old.isr + old.elr:
                    raise Violation(f"leader {new.leader} elected outside ISR/ELR of {old}")
            self.counts["dropped"] += len(self.outstanding)
            self.outstanding.clear()
            for r in self.replicas:
                r.leader = None
            if new.leader != NO_LEADER:
                lr = self.replicas[new.leader]
                assert lr.alive and not lr.paused
                lr.entries = le.assign(lr.entries, new.leader_epoch, lr.leo) or lr.entries
                lr.follower = None
                lr.leader = LeaderState(
                    broker_id=lr.id,
                    replicas=new.replicas,
                    isr=new.isr,
                    leader_epoch=new.leader_epoch,
                    partition_epoch=new.partition_epoch,
                    log_end_offset=lr.leo,
                    high_watermark=lr.hw,
                    now_ms=self.now,
                    min_insync_replicas=self.min_isr,
                    replica_lag_time_max_ms=self.lag_ms,
                )
                lr.leader.ineligible = ineligible
            for r in self.replicas:
                if r.id != new.leader and r.alive and not r.paused:
                    self._follow(r)
        elif self.leader is not None and self.leader.leader is not None:
            self.leader.leader.update_from_metadata(
                isr=new.isr,
                leader_epoch=new.leader_epoch,
                partition_epoch=new.partition_epoch,
                ineligible=ineligible,
            )

    def _follow(self, r: Replica) -> None:
        if self.reg.leader == NO_LEADER:
            return
        if r.follower is None:
            r.follower = FollowerState(replica_id=r.id, broker_epoch=r.broker_epoch)
        r.follower.become_follower(self.reg.leader, self.reg.leader_epoch)

    def _elect_if_offline(self) -> None:
        if self.reg.leader == NO_LEADER:
            e = ctl.elect_leader(self.reg, self.brokers, unclean_enabled=self.unclean)
            if e is not None and e.leader != NO_LEADER:
                self.apply(e.registration, unclean=e.unclean)

    # --- actions ----------------------------------------------------------------------------

    def produce(self, count: int, acks: int) -> None:
        lr = self.leader
        if lr is None or lr.leader is None:
            return
        ls = lr.leader
        if acks == -1:
            self.counts["acks_all"] += 1
        if ls.check_append(acks) != errors.NONE:
            self.counts["not_enough_replicas"] += 1
            return
        records = []
        for _ in range(max(1, count)):
            self.values += 1
            records.append((lr.leo + len(records), ls.leader_epoch, self.values))
        lr.append(records)
        ls.on_leader_append(lr.leo)
        if acks == -1:
            self.outstanding.append((ls, records))

    def fetch(self, rid: int, max_records: int) -> None:
        r = self.replicas[rid]
        lr = self.leader
        if not r.alive or r.paused or r.follower is None or lr is None or lr.leader is None:
            return
        f, ls = r.follower, lr.leader
        for _ in range(20):
            if f.phase is not FollowerPhase.TRUNCATING:
                break
            req = f.epoch_request(r.entries)
            if req is None:
                break
            err, epoch, end = ls.offsets_for_leader_epoch(
                lr.entries, req.current_leader_epoch, req.requested_epoch
            )
            d = f.on_epoch_response(err, epoch, end, r.entries, r.leo, 0)
            if d is None:
                return
            if d.start_at is not None:
                r.truncate_to(0)
            elif d.truncate_to is not None:
                r.truncate_to(d.truncate_to)
        else:
            raise Violation("truncation did not converge")
        req = f.fetch_request(r.leo)
        if req is None:
            return
        err = ls.validate_fetch(rid, req.current_leader_epoch)
        if err != errors.NONE:
            f.on_fetch_error(err)
            return
        if req.fetch_offset > lr.leo:
            d = out_of_range_decision(r.leo, 0, lr.leo)
            r.truncate_to(d.truncate_to if d.truncate_to is not None else 0)
            return
        update = ls.update_follower_fetch(rid, req.fetch_offset, self.now, req.broker_epoch)
        if update.alter_partition is not None:
            self.queue.append((ls, update.alter_partition))
        r.append(lr.log[r.leo : r.leo + max_records])
        f.on_fetch_response(ls.high_watermark, r.leo)
        r.hw = f.high_watermark

    def shrink(self) -> None:
        lr = self.leader
        if lr is not None and lr.leader is not None:
            req = lr.leader.maybe_shrink_isr(self.now)
            if req is not None:
                self.queue.append((lr.leader, req))

    def process_alter_partition(self) -> None:
        if not self.queue:
            return
        ls, req = self.queue.pop(0)
        res = ctl.alter_partition(self.reg, req, self.brokers, min_isr=self.min_isr)
        if res.error == errors.NONE:
            self.apply(res.registration)
        reg = res.registration
        answer = AlterPartitionResponse(res.error, reg.leader_epoch, reg.partition_epoch, reg.isr)
        lr = self.leader
        if lr is not None and lr.leader is ls:
            ls.on_alter_partition_response(answer)

    def _fence(self, rid: int) -> None:
        e = ctl.fence_broker(
            self.reg, rid, self.brokers, min_isr=self.min_isr, unclean_enabled=self.unclean
        )
        if e is not None:
            self.apply(e.registration, unclean=e.unclean)

    def crash(self, rid: int, keep: int) -> None:
        """kill -9: the unflushed tail is cut (``keep`` picks how much of it survives)."""
        r = self.replicas[rid]
        if not r.alive:
            return
        r.alive = False
        r.leader = r.follower = None
        unflushed = r.leo - r.flushed
        r.truncate_to(r.flushed + (keep % (unflushed + 1)))
        self._fence(rid)

    def restart(self, rid: int) -> None:
        r = self.replicas[rid]
        if r.alive:
            return
        r.alive = True
        r.paused = False
        r.broker_epoch += 1
        r.hw = min(r.hw, r.leo)
        kept = le.truncate_from_end(r.entries, r.leo)  # as opening the log does
        if kept is not None:
            r.entries = kept
        new = ctl.unclean_restart(self.reg, rid)
        if new is not None:
            self.apply(new)
        self._elect_if_offline()
        if self.reg.leader != rid:
            self._follow(r)

    def pause(self, rid: int) -> None:
        """SIGSTOP past the session timeout: fenced, its log intact."""
        r = self.replicas[rid]
        if not r.alive or r.paused:
            return
        r.paused = True
        r.leader = r.follower = None
        self._fence(rid)

    def resume(self, rid: int) -> None:
        r = self.replicas[rid]
        if not r.alive or not r.paused:
            return
        r.paused = False
        self._elect_if_offline()
        if self.reg.leader != rid:
            self._follow(r)

    def flush(self, rid: int) -> None:
        r = self.replicas[rid]
        r.flushed = r.leo

    def preferred(self) -> None:
        new = ctl.preferred_leader_election(self.reg, self.brokers)
        if new is not None:
            self.apply(new)

    def tick(self, ms: int) -> None:
        self.now += ms

    # --- invariants -------------------------------------------------------------------------

    def settle_acks(self) -> None:
        kept = []
        for ls, records in self.outstanding:
            status = ls.check_acks_all(records[-1][0])
            if status is AckStatus.COMPLETE:
                for rec in records:
                    self.acked[rec[0]] = rec
            elif status is AckStatus.PENDING:
                kept.append((ls, records))
            else:
                self.counts["after_append"] += 1
        self.outstanding = kept

    def check(self) -> None:
        self.settle_acks()
        lr = self.leader
        if lr is None or lr.leader is None:
            return
        ls = lr.leader
        seen_ls, seen_hw = self.hw_seen
        if seen_ls is ls and ls.high_watermark < seen_hw:
            raise Violation("the high watermark moved back on a leader")
        self.hw_seen = (ls, ls.high_watermark)
        if ls.high_watermark > lr.leo:
            raise Violation("HW above the leader's LEO")
        hw = ls.high_watermark
        if not self.unclean_elections:
            # Committed: every record that was ever below a leader's HW (consumers may have
            # read it); acknowledged acks=all records are a subset.
            for off in range(hw):
                if self.committed.setdefault(off, lr.log[off]) != lr.log[off]:
                    raise Violation(f"committed {self.committed[off]} replaced by {lr.log[off]}")
            for off, rec in (*self.acked.items(), *self.committed.items()):
                if off >= lr.leo or lr.log[off] != rec:
                    raise Violation(f"committed or acknowledged {rec} missing on leader {lr.id}")
        for r in self.replicas:
            if r is lr or not r.alive:
                continue
            if self._in_sync_incarnation(ls, r) and r.log[:hw] != lr.log[:hw]:
                raise Violation(f"ISR member {r.id} differs from the leader below HW {hw}")
            f = r.follower
            if f is not None and f.phase is FollowerPhase.FETCHING:
                if r.log != lr.log[: r.leo]:
                    raise Violation(f"follower {r.id} diverged from leader {lr.id}")
                if not self.unclean_elections and r.log[: r.hw] != lr.log[: r.hw]:
                    raise Violation(f"follower {r.id} HW {r.hw} above a divergence")

    @staticmethod
    def _in_sync_incarnation(ls: LeaderState, r: Replica) -> bool:
        """``r`` is in the leader's maximal ISR as the incarnation the leader knows. A pending
        expansion names each member with the broker epoch of its last fetch; a replica that
        restarted since (a new broker epoch, its unflushed tail maybe lost) is refused by the
        controller (KIP-903), so it is not in sync even while that proposal is in flight."""
        if r.id in ls.isr:
            return True
        if ls.pending is None:
            return False
        return (r.id, r.broker_epoch) in ls.pending.new_isr

    def heal(self) -> bool:
        """Restart and resume everyone and replicate until quiet; False if no leader."""
        for r in self.replicas:
            self.restart(r.id)
            self.resume(r.id)
        self._elect_if_offline()
        self.check()
        if self.leader is None:
            return False
        for _ in range(12):
            for r in self.replicas:
                self.fetch(r.id, 1_000_000)
                self.check()
            while self.queue:
                self.process_alter_partition()
                self.check()
        return True


NO_LEADER = ctl.NO_LEADER
