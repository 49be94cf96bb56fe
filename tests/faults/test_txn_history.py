"""The transactions checker itself: a clean consume-transform-produce history counts
nothing, and a history breaking each rule fails that rule (no cluster; milliseconds)."""

from __future__ import annotations

from tests.faults.txn_history import TxnHistory

PARTITIONS = 2


def clean() -> TxnHistory:
    """Eight inputs on two partitions; incarnation 1 commits 1.1 (inputs 0-3), aborts 1.2
    (inputs 4-5, written then dropped) and is killed with 1.3 open; incarnation 2 resumes at
    the offsets 1.1 committed and commits 2.1 (inputs 4-7). Outputs go to the partition of
    the input's number modulo two, so every transaction spans both partitions."""
    h = TxnHistory("unit")
    for i in range(8):
        h.inputs[(i % 2, i // 2)] = f"i{i}"
    h.input_ends = {0: 4, 1: 4}

    def txn(key: str, numbers: range, before: dict, after: dict, outcome: str) -> None:
        h.begin(key, {f"i{i}>{key}": i % 2 for i in numbers}, before, after)
        h.outcome(key, outcome)

    h.resume(1, {0: 0, 1: 0})
    txn("1.1", range(4), {0: 0, 1: 0}, {0: 2, 1: 2}, "committed")
    txn("1.2", range(4, 6), {0: 2, 1: 2}, {0: 3, 1: 3}, "aborted")
    txn("1.3", range(4, 6), {0: 2, 1: 2}, {0: 3, 1: 3}, "open")
    h.resume(2, {0: 2, 1: 2})
    txn("2.1", range(4, 8), {0: 2, 1: 2}, {0: 4, 1: 4}, "committed")
    offsets = {0: 0, 1: 0}
    for key, numbers in (("1.1", range(4)), ("2.1", range(4, 8))):
        for i in numbers:
            h.final.append((i % 2, offsets[i % 2], f"i{i}>{key}"))
            offsets[i % 2] += 1
    h.reads = list(h.final[:3])
    h.committed_offsets = {0: 4, 1: 4}
    return h


def test_a_clean_history_counts_nothing() -> None:
    verdict = clean().check()
    assert verdict.problems() == {}
    assert verdict.transactions == {"committed": 2, "aborted": 1, "open": 1}
    assert verdict.inputs == verdict.outputs_read == 8


def test_a_read_of_an_aborted_or_unfinished_transaction() -> None:
    h = clean()
    h.final.append((0, 4, "i4>1.2"))  # aborted
    h.reads.append((1, 9, "i5>1.3"))  # never asked to commit: unfinished
    verdict = h.check()
    assert len(verdict.uncommitted_read) == 2
    assert "aborted" in verdict.uncommitted_read[0] and "open" in verdict.uncommitted_read[1]


def test_a_fenced_zombies_write_is_an_uncommitted_read() -> None:
    h = clean()
    h.begin("1.4", {"i6>1.4": 0}, {0: 3, 1: 3}, {0: 4, 1: 3})
    h.outcome("1.4", "fenced")
    h.final.append((0, 4, "i6>1.4"))
    assert [e.split(" ")[0] for e in h.check().uncommitted_read] == ["i6>1.4"]


def test_a_run_read_later_gone_and_a_phantom() -> None:
    h = clean()
    h.begin("2.2", {"i7>2.2": 1}, {0: 4, 1: 3}, {0: 4, 1: 4})
    h.outcome("2.2", "unknown")  # decided abort: read while undecided, then gone
    h.reads.append((1, 4, "i7>2.2"))
    h.final.append((0, 4, "i9>3.1"))  # no such transaction
    h.final.append((0, 5, "i1>1.1"))  # 1.1 wrote i1 to partition 1, not 0
    verdict = h.check()
    assert verdict.uncommitted_read == ["i7>2.2 at 1/4 (run, later gone)"]
    assert verdict.phantom == ["i9>3.1 at 0/4 (final)", "i1>1.1 at 0/5 (final)"]


def test_a_partial_commit() -> None:
    h = clean()
    h.final = [row for row in h.final if row[2] != "i5>2.1"]
    verdict = h.check()
    assert verdict.partial == ["2.1 (committed): 3 of 4"]
    assert verdict.committed_missing == ["2.1: 3 of 4"]
    assert verdict.missing == ["i5"]


def test_an_unknown_outcome_is_all_or_nothing() -> None:
    h = clean()
    h.txns["2.1"].outcome = "unknown"
    assert h.check().problems() == {}  # all of it: fine
    h.final = [row for row in h.final if not row[2].endswith(">2.1")]
    h.committed_offsets = {0: 2, 1: 2}  # none of it, offsets included: only inputs missing
    verdict = h.check()
    assert verdict.partial == [] and verdict.committed_missing == []
    assert sorted(verdict.missing) == ["i4", "i5", "i6", "i7"]


def test_an_input_output_twice() -> None:
    h = clean()
    h.begin("2.2", {"i6>2.2": 0}, {0: 3, 1: 4}, {0: 4, 1: 4})
    h.outcome("2.2", "committed")
    h.final.append((0, 4, "i6>2.2"))
    verdict = h.check()
    assert verdict.duplicated == ["i6: ['2.1', '2.2']"]


def test_offsets_committed_without_the_outputs() -> None:
    """Incarnation 2 resumed past inputs 4-5 whose outputs (1.2) were aborted: the offsets
    of an aborted transaction were committed anyway."""
    h = clean()
    h.resumes[1] = (2, {0: 3, 1: 3})
    verdict = h.check()
    assert len(verdict.offsets_apart) == 2
    assert all("has no output" in e for e in verdict.offsets_apart)


def test_outputs_committed_without_the_offsets() -> None:
    """Incarnation 2 resumed from the start although 1.1 committed: its offsets were lost
    (and its outputs 2.1 would then duplicate 1.1's)."""
    h = clean()
    h.resumes[1] = (2, {0: 0, 1: 0})
    verdict = h.check()
    assert len(verdict.offsets_apart) == 4
    assert all("already output" in e for e in verdict.offsets_apart)


def test_final_offsets_short_of_the_input() -> None:
    h = clean()
    h.committed_offsets = {0: 4, 1: 3}
    assert h.check().offsets_apart == ["at the end partition 1 committed at 3, input ends 4"]
