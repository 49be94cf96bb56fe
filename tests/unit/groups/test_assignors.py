"""Assignors: exact layouts for range and round-robin, and hypothesis properties (one owner
per subscribed partition, subscriptions respected, balance, stickiness) for all three."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.groups import (
    ASSIGNORS,
    MemberSubscription,
    TopicPartition,
    UnsupportedAssignorError,
    get_assignor,
    range_assign,
    round_robin_assign,
    uniform_assign,
)

TP = TopicPartition


def subs(*topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(frozenset(topics), instance)


def test_range_gives_contiguous_ranges_extra_to_the_first():
    members = {"b": subs("t"), "a": subs("t")}
    out = range_assign(members, {"t": 5}, {})
    assert out == {"a": {TP("t", 0), TP("t", 1), TP("t", 2)}, "b": {TP("t", 3), TP("t", 4)}}


def test_range_orders_static_members_by_instance_id():
    members = {"m1": subs("t", instance="z"), "m2": subs("t", instance="a")}
    out = range_assign(members, {"t": 2}, {})
    assert out == {"m2": {TP("t", 0)}, "m1": {TP("t", 1)}}


def test_round_robin_deals_in_turn_skipping_unsubscribed():
    members = {"a": subs("x", "y"), "b": subs("y")}
    out = round_robin_assign(members, {"x": 2, "y": 2}, {})
    assert out == {"a": {TP("x", 0), TP("x", 1), TP("y", 1)}, "b": {TP("y", 0)}}


def test_missing_topics_and_empty_groups():
    for assign in ASSIGNORS.values():
        assert assign({}, {"t": 3}, {}) == {}
        assert assign({"a": subs("nope")}, {"t": 3}, {}) == {"a": frozenset()}


def test_uniform_keeps_current_owners_and_moves_only_to_the_newcomer():
    members = {"a": subs("t"), "b": subs("t")}
    before = uniform_assign(members, {"t": 6}, {})
    members["c"] = subs("t")
    after = uniform_assign(members, {"t": 6}, before)
    assert [len(after[m]) for m in "abc"] == [2, 2, 2]
    assert after["a"] <= before["a"] and after["b"] <= before["b"]


def test_uniform_drops_invalid_current_ownership():
    members = {"a": subs("t")}
    current = {"a": frozenset({TP("t", 9), TP("gone", 0)}), "ghost": frozenset({TP("t", 0)})}
    assert uniform_assign(members, {"t": 2}, current) == {"a": {TP("t", 0), TP("t", 1)}}


def test_unknown_assignor():
    with pytest.raises(UnsupportedAssignorError):
        get_assignor("cooperative-sticky")


# --- properties ------------------------------------------------------------------------

TOPICS = ["t0", "t1", "t2"]


@st.composite
def groups(draw, identical: bool = False):
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS}
    n = draw(st.integers(1, 7))
    if identical:
        topics = frozenset(draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)))
        members = {f"m{i}": MemberSubscription(topics) for i in range(n)}
    else:
        members = {
            f"m{i}": MemberSubscription(
                frozenset(draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)))
            )
            for i in range(n)
        }
    return members, counts


def check_valid(members, counts, out):
    assert set(out) == set(members)
    wanted = {TP(t, p) for s in members.values() for t in s.topics for p in range(counts.get(t, 0))}
    seen: list[TopicPartition] = [tp for tps in out.values() for tp in tps]
    assert len(seen) == len(set(seen)), "a partition has two owners"
    assert set(seen) == wanted, "every subscribed partition has exactly one owner"
    for m, tps in out.items():
        assert all(tp.topic in members[m].topics for tp in tps)


@settings(max_examples=150, deadline=None)
@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_every_assignor_is_valid(group, name):
    members, counts = group
    check_valid(members, counts, get_assignor(name)(members, counts, {}))


@settings(max_examples=150, deadline=None)
@given(groups(identical=True), st.sampled_from(["uniform", "round-robin"]))
def test_identical_subscriptions_balance_within_one(group, name):
    members, counts = group
    out = get_assignor(name)(members, counts, {})
    loads = [len(v) for v in out.values()]
    assert max(loads) - min(loads) <= 1


def min_moves(current_counts: list[int], total: int) -> int:
    """The fewest partitions that must change owner to balance ``total`` partitions within
    one over members currently holding ``current_counts`` (still valid) partitions: the
    members holding most keep the ``total % n`` larger quotas."""
    n = len(current_counts)
    floor, extra = divmod(total, n)
    quotas = [floor + 1] * extra + [floor] * (n - extra)
    held = sorted(current_counts, reverse=True)
    return sum(max(0, c - q) for c, q in zip(held, quotas, strict=True))


def moved(before, after) -> int:
    """Partitions that had a (surviving) owner before and a different one after."""
    owner = {tp: m for m, tps in before.items() for tp in tps}
    return sum(1 for m, tps in after.items() for tp in tps if owner.get(tp, m) != m)


@settings(max_examples=200, deadline=None)
@given(groups(identical=True), st.data())
def test_uniform_is_sticky_and_balanced_after_join_and_leave(group, data):
    members, counts = group
    before = uniform_assign(members, counts, {})
    # Some members leave, some join; the survivors' current partitions are still valid.
    leaving = data.draw(st.sets(st.sampled_from(sorted(members)), max_size=len(members) - 1))
    joining = data.draw(st.integers(0, 3))
    topics = next(iter(members.values())).topics
    after_members = {m: s for m, s in members.items() if m not in leaving}
    after_members.update({f"new{i}": MemberSubscription(topics) for i in range(joining)})
    after = uniform_assign(after_members, counts, before)
    check_valid(after_members, counts, after)
    loads = [len(v) for v in after.values()]
    assert max(loads) - min(loads) <= 1
    kept = {m: before.get(m, frozenset()) for m in after_members}
    total = sum(counts[t] for t in topics)
    assert moved(kept, after) == min_moves([len(v) for v in kept.values()], total)


@settings(max_examples=150, deadline=None)
@given(groups(), st.data())
def test_uniform_is_valid_and_stable_with_mixed_subscriptions(group, data):
    members, counts = group
    first = uniform_assign(members, counts, {})
    assert uniform_assign(members, counts, first) == first, "no change, no movement"
    leaving = data.draw(st.sampled_from(sorted(members)))
    rest = {m: s for m, s in members.items() if m != leaving}
    after = uniform_assign(rest, counts, first)
    check_valid(rest, counts, after)
    # Balanced as far as subscriptions allow: no partition could go to a subscribed member
    # holding two or more fewer partitions than its owner.
    for tps in after.values():
        for taker, sub in rest.items():
            if any(tp.topic in sub.topics for tp in tps):
                assert len(after[taker]) + 1 >= len(tps)
