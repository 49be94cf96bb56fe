"""Server-side partition assignors (KIP-848): pure functions from the group's members and the
topics' partition counts (and, for the sticky one, the current assignment) to a target
assignment.

Each takes ``members`` (member id -> :class:`MemberSubscription`), ``partition_counts``
(topic -> number of partitions; topics missing here are ignored) and ``current`` (member id ->
partitions it is assigned now) and returns member id -> frozenset of partitions, with an entry
(possibly empty) for every member. Every partition of a subscribed topic gets exactly one
owner, and only a member subscribed to its topic.

- ``range``: per topic, the subscribers (ordered by instance id, else member id) get
  contiguous ranges; the first ``partitions % subscribers`` get one more (Kafka's
  RangeAssignor). Co-partitioned topics line up, balance is per topic only.
- ``round-robin``: all subscribed partitions in (topic, partition) order dealt in turn to the
  members, skipping members not subscribed to the topic (Kafka's RoundRobinAssignor).
- ``uniform`` (the default, sticky): keeps every still-valid current ownership, gives the
  unowned partitions to the least-loaded eligible member, then moves partitions from the most
  to the least loaded member while they differ by more than one. With identical subscriptions
  this balances within one partition per member and moves the fewest partitions possible;
  with different subscriptions it balances as far as the subscriptions allow (a move is only
  made to a member subscribed to the partition's topic).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Mapping

from brokernodes.groups.errors import UnsupportedAssignorError
from brokernodes.groups.types import Assignment, MemberSubscription, TopicPartition, partitions_of

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "Assignor",
    "get_assignor",
    "range_assign",
    "round_robin_assign",
    "uniform_assign",
]

Assignor = Callable[
    [Mapping[str, MemberSubscription], Mapping[str, int], Assignment],
    dict[str, frozenset[TopicPartition]],
]


def _member_order(members: Mapping[str, MemberSubscription]) -> list[str]:
    """Members ordered by instance id (static members first), then member id."""
    return sorted(
        members,
        key=lambda m: (members[m].instance_id is None, members[m].instance_id or "", m),
    )


def _subscribed_topics(
    members: Mapping[str, MemberSubscription], partition_counts: Mapping[str, int]
) -> list[str]:
    topics = set().union(*(s.topics for s in members.values())) if members else set()
    return sorted(t for t in topics if partition_counts.get(t, 0) > 0)


def range_assign(
    members: Mapping[str, MemberSubscription],
    partition_counts: Mapping[str, int],
    current: Assignment | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """Kafka's range assignor; ``current`` is ignored."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    order = _member_order(members)
    for topic in _subscribed_topics(members, partition_counts):
        subs = [m for m in order if topic in members[m].topics]
        count = partition_counts[topic]
        per, extra = divmod(count, len(subs))
        start = 0
        for i, member in enumerate(subs):
            n = per + (1 if i < extra else 0)
            out[member].update(TopicPartition(topic, p) for p in range(start, start + n))
            start += n
    return {m: frozenset(tps) for m, tps in out.items()}


def round_robin_assign(
    members: Mapping[str, MemberSubscription],
    partition_counts: Mapping[str, int],
    current: Assignment | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """Kafka's round-robin assignor; ``current`` is ignored."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    order = _member_order(members)
    if not order:
        return {}
    ring = itertools.cycle(order)
    for topic in _subscribed_topics(members, partition_counts):
        for tp in partitions_of(topic, partition_counts[topic]):
            member = next(ring)
            while topic not in members[member].topics:
                member = next(ring)
            out[member].add(tp)
    return {m: frozenset(tps) for m, tps in out.items()}


def uniform_assign(
    members: Mapping[str, MemberSubscription],
    partition_counts: Mapping[str, int],
    current: Assignment | None = None,
) -> dict[str, frozenset[TopicPartition]]:
    """The sticky uniform assignor (see the module docstring)."""
    current = current or {}
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    taken: set[TopicPartition] = set()
    # 1. Keep what is still valid: the member is still here and subscribed, the partition
    #    still exists, and nobody earlier (in member-id order) already kept it.
    for member in sorted(current):
        if member not in members:
            continue
        topics = members[member].topics
        for tp in sorted(current[member]):
            if (
                tp.topic in topics
                and 0 <= tp.partition < partition_counts.get(tp.topic, 0)
                and tp not in taken
            ):
                owned[member].add(tp)
                taken.add(tp)
    # 2. Unowned partitions to the least-loaded eligible member; the most constrained topics
    #    (fewest subscribers) first so the flexible ones can fill the gaps.
    subscribers = {
        t: sorted(m for m in members if t in members[m].topics)
        for t in _subscribed_topics(members, partition_counts)
    }
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        subs = subscribers[topic]
        heap = [(len(owned[m]), m) for m in subs]
        heapq.heapify(heap)
        for tp in partitions_of(topic, partition_counts[topic]):
            if tp in taken:
                continue
            while True:
                load, member = heapq.heappop(heap)
                if load == len(owned[member]):
                    break
                heapq.heappush(heap, (len(owned[member]), member))
            owned[member].add(tp)
            taken.add(tp)
            heapq.heappush(heap, (len(owned[member]), member))
    # 3. Balance: move from the most to the least loaded member that may take one of its
    #    partitions, while the two differ by more than one. Each move lowers the sum of
    #    squared loads, so this ends.
    _balance(members, owned)
    return {m: frozenset(tps) for m, tps in owned.items()}


def _balance(members: Mapping[str, MemberSubscription], owned: dict[str, set[TopicPartition]]):
    """Move partitions from the most to the least loaded eligible member until no member
    holds two or more partitions more than one that could take one of them."""
    by_topic: dict[str, dict[str, list[TopicPartition]]] = {m: {} for m in owned}
    for m, tps in owned.items():
        for tp in sorted(tps):
            by_topic[m].setdefault(tp.topic, []).append(tp)
    takers = {
        t: sorted(m for m in members if t in members[m].topics)
        for t in {t for topics in by_topic.values() for t in topics}
    }
    while True:
        best: tuple[int, str, str] | None = None
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for topic, tps in by_topic[donor].items():
                if not tps:
                    continue
                for taker in takers[topic]:
                    if taker != donor and len(owned[taker]) + 1 < len(owned[donor]):
                        cand = (len(owned[taker]), taker, topic)
                        if best is None or cand < best:
                            best = cand
            if best is not None:
                break
        if best is None:
            return
        _, taker, topic = best
        tp = by_topic[donor][topic].pop()  # the highest partition: lists are sorted
        owned[donor].remove(tp)
        owned[taker].add(tp)
        bisect.insort(by_topic[taker].setdefault(topic, []), tp)


ASSIGNORS: dict[str, Assignor] = {
    "uniform": uniform_assign,
    "range": range_assign,
    "round-robin": round_robin_assign,
}
DEFAULT_ASSIGNOR = "uniform"


def get_assignor(name: str) -> Assignor:
    """The assignor called ``name`` (``uniform``, ``range``, ``round-robin``)."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise UnsupportedAssignorError(
            f"unknown assignor {name!r}; expected one of {', '.join(sorted(ASSIGNORS))}"
        ) from None
