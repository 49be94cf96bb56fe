"""The checker itself: each anomaly an outside checker looks for is counted where it is
planted, and a clean history counts nothing (no cluster; milliseconds)."""

from __future__ import annotations

from tests.faults.history import History


def clean() -> History:
    """Two producers on two partitions, every record acknowledged where it is, three
    identical replicas, a high watermark past everything."""
    h = History("unit")
    log: dict[int, list[tuple[int, str]]] = {0: [], 1: []}
    for i in range(6):
        for producer in ("a", "b"):
            value = f"{producer}-{i}"
            partition = i % 2
            h.attempt(value, producer, i)
            offset = len(log[partition])
            log[partition].append((offset, value))
            h.ack(value, partition, offset)
    for partition, records in log.items():
        h.final[partition] = list(records)
        h.high_watermarks[partition] = len(records)
        h.replicas[partition] = {b: list(records) for b in (1, 2, 3)}
    return h


def test_a_clean_history_counts_nothing() -> None:
    verdict = clean().check()
    assert verdict.attempted == verdict.acknowledged == 12
    assert verdict.problems() == {}
    assert verdict.unknown == []
    assert verdict.replicas_compared == 6


def test_lost_and_wrong_offset() -> None:
    h = clean()
    h.final[0] = [(o, v) for o, v in h.final[0] if v != "a-0"]  # gone from the leader
    h.acks["b-1"] = (1, 5, 0.0)  # acknowledged at 5, lies at another offset
    verdict = h.check()
    assert verdict.lost == ["a-0"]
    assert len(verdict.wrong_offset) == 1 and verdict.wrong_offset[0].startswith("b-1")


def test_duplicated_and_phantom() -> None:
    h = clean()
    n = len(h.final[0])
    h.final[0] += [(n, "a-0"), (n + 1, "never-sent")]
    h.high_watermarks[0] = n + 2
    for b in (1, 2, 3):
        h.replicas[0][b] = list(h.final[0])
    verdict = h.check()
    assert [d.split(" ")[0] for d in verdict.duplicated] == ["a-0"]
    assert verdict.phantom == ["never-sent"]


def test_phantom_on_a_follower_only() -> None:
    h = clean()
    h.replicas[1][3] = [(0, "ghost"), *h.replicas[1][3][1:]]
    verdict = h.check()
    assert verdict.phantom == ["ghost"]
    assert len(verdict.divergent) == 1


def test_reordered_per_producer_and_partition() -> None:
    h = clean()
    # a-0 and a-2 both on partition 0: a-2 (sent later) acknowledged below a-0
    (p0, o0, t0), (p2, o2, t2) = h.acks["a-0"], h.acks["a-2"]
    h.acks["a-0"], h.acks["a-2"] = (p0, o2, t0), (p2, o0, t2)
    h.final[0] = [(o, {"a-0": "a-2", "a-2": "a-0"}.get(v, v)) for o, v in h.final[0]]
    for b in (1, 2, 3):
        h.replicas[0][b] = list(h.final[0])
    verdict = h.check()
    assert len(verdict.reordered) == 1 and verdict.reordered[0].startswith("a-2")
    assert not verdict.lost and not verdict.wrong_offset


def test_a_hole_and_a_differing_replica_are_divergent() -> None:
    h = clean()
    del h.replicas[0][2][3]  # a hole on one follower
    h.replicas[1][3][0] = (0, "b-0")  # another value (b-0 really is on partition 0)
    h.final[1] = h.final[1][:2] + h.final[1][3:]  # a hole in the leader's own log
    verdict = h.check()
    assert any("hole at 1/2" in d for d in verdict.divergent)
    assert any("broker 2" in d and d.startswith("0/3") for d in verdict.divergent)
    assert any("broker 3" in d and d.startswith("1/0") for d in verdict.divergent)


def test_a_read_later_replaced_is_divergent() -> None:
    h = clean()
    h.read(0, 1, "something-else")
    assert h.check().divergent == ["read 'something-else' at 0/1, now 'b-0'"]


def test_unanswered_is_unknown_not_an_error() -> None:
    h = clean()
    h.attempt("a-99", "a", 99)
    h.attempt("a-100", "a", 100)
    h.fail("a-100", TimeoutError("no answer"))
    verdict = h.check()
    assert verdict.unknown == ["a-99"]
    assert verdict.failed == 1
    assert verdict.problems() == {}


def test_seconds_to_recover_waits_for_every_partition() -> None:
    h = History("recover")
    h.faults.append(("kill", 10.0))
    h.attempts.update({"x": ("p", 0, 10.5), "y": ("p", 1, 10.6), "z": ("p", 2, 9.0)})
    h.acks.update({"x": (0, 0, 11.0), "y": (1, 0, 14.0), "z": (2, 0, 10.1)})
    # z was sent before the fault: it does not count
    assert h.check().seconds_to_recover == 4.0


def test_an_ack_without_offset_is_checked_for_loss_only() -> None:
    """librdkafka acknowledges a retried batch the broker answered as a duplicate without an
    offset: the record must still be in the log, and nothing else is asked of it."""
    h = clean()
    h.acks["a-2"] = (0, None, 0.0)
    assert h.check().problems() == {}
    h.final[0] = [(o, v) for o, v in h.final[0] if v != "a-2"]
    assert h.check().lost == ["a-2"]
