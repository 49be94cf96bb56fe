"""The history of a transactional consume-transform-produce run and the checks an outside
checker runs on it (the transactions fault scenario, tests/faults/test_kafka_transactions.py).

A worker reads input records (read_committed, its group's committed offsets) and, for each
batch, writes one output per input in a Kafka transaction that also commits the group's
offsets. Each output value names its input and its transaction: ``<input>><txn>``, the
transaction being ``<incarnation>.<n>`` (one incarnation per worker process, one
transactional id for all of them, so every new incarnation fences the previous one).

Recorded: every input record ``(partition, offset) -> value``; every transaction the worker
began (its outputs with their partitions, the input positions before and after it) and its
outcome as the worker learned it; every incarnation's start (the committed offsets it
resumed from, read after ``init_transactions`` settled the previous incarnation's
transaction); every output a read_committed consumer read while the faults ran; the final
read_committed contents of the output topic; the group's final committed offsets. Checked:

- **uncommitted read**: a read (during the run or at the end) of an output whose transaction
  never committed: aborted, fenced, or never sent to commit (unfinished), or one the final
  committed log does not hold (a read of an undecided transaction later aborted);
- **phantom**: an output read that no transaction wrote;
- **partial**: a transaction some but not all of whose outputs are in the final log;
- **committed missing**: a transaction whose commit the worker was told succeeded, with
  outputs missing from the final log;
- **duplicated** / **missing**: an input whose output is in the final log more than once, or
  never (every input is processed by the end);
- **offsets apart**: offsets not committed with their transaction: at an incarnation's
  start, an input below the committed offset without a committed output from an earlier
  incarnation (offsets committed without the outputs), or one at or above it with one
  (outputs committed without the offsets); at the end, a committed offset other than the
  input's end.

Outcomes: ``committed`` and ``aborted`` (the worker was answered), ``fenced`` (its commit
was refused because a newer incarnation bumped the epoch), ``open`` (killed before asking to
commit: it can never commit), ``unknown`` (asked to commit, never answered: either way is
correct, all or nothing).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

NEVER_COMMITTED = ("aborted", "fenced", "open")
OUTCOMES = ("committed", "aborted", "fenced", "open", "unknown")


def split_output(value: str) -> tuple[str, str]:
    """``<input>><txn>`` -> (input, txn); a value without the separator names no txn."""
    input_value, sep, txn = value.rpartition(">")
    return (input_value, txn) if sep else (value, "")


@dataclass
class Txn:
    key: str  # "<incarnation>.<n>"
    incarnation: int
    outputs: dict[str, int]  # output value -> partition
    before: dict[int, int]  # input partition -> position before the transaction
    after: dict[int, int]  # input partition -> offset committed with it
    outcome: str = "open"


@dataclass
class TxnVerdict:
    name: str
    inputs: int
    transactions: dict[str, int]  # outcome -> count
    outputs_read: int
    uncommitted_read: list[str]
    phantom: list[str]
    partial: list[str]
    committed_missing: list[str]
    duplicated: list[str]
    missing: list[str]
    offsets_apart: list[str]
    replicas_compared: int = 0
    extra: dict = field(default_factory=dict)

    ERRORS = (
        "uncommitted_read",
        "phantom",
        "partial",
        "committed_missing",
        "duplicated",
        "missing",
        "offsets_apart",
    )

    def counts(self) -> dict:
        return {
            "inputs": self.inputs,
            **{f"txn_{o}": self.transactions.get(o, 0) for o in OUTCOMES},
            "outputs_read": self.outputs_read,
            **{name: len(getattr(self, name)) for name in self.ERRORS},
            "replicas_compared": self.replicas_compared,
            **self.extra,
        }

    def summary(self) -> str:
        c = self.counts()
        keys = ("inputs", *(f"txn_{o}" for o in OUTCOMES), "outputs_read", *self.ERRORS)
        return (
            f"[{self.name}] "
            + " ".join(f"{k}={c[k]}" for k in keys)
            + f" replicas_compared={self.replicas_compared}"
        )

    def problems(self) -> dict[str, list[str]]:
        return {name: getattr(self, name) for name in self.ERRORS if getattr(self, name)}


class TxnHistory:
    """Thread-safe record of a run (the tailing consumer reads on a thread of its own)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.inputs: dict[tuple[int, int], str] = {}
        self.input_ends: dict[int, int] = {}
        self.txns: dict[str, Txn] = {}
        self.resumes: list[tuple[int, dict[int, int]]] = []  # (incarnation, committed)
        self.reads: list[tuple[int, int, str]] = []
        self.final: list[tuple[int, int, str]] = []
        self.committed_offsets: dict[int, int] = {}

    # --- recording -------------------------------------------------------------------------

    def begin(
        self,
        key: str,
        outputs: dict[str, int],
        before: dict[int, int],
        after: dict[int, int],
    ) -> None:
        incarnation = int(key.split(".", 1)[0])
        with self._lock:
            self.txns[key] = Txn(key, incarnation, dict(outputs), dict(before), dict(after))

    def outcome(self, key: str, outcome: str) -> None:
        assert outcome in OUTCOMES, outcome
        with self._lock:
            self.txns[key].outcome = outcome

    def resume(self, incarnation: int, committed: dict[int, int]) -> None:
        with self._lock:
            self.resumes.append((incarnation, dict(committed)))

    def read(self, partition: int, offset: int, value: str) -> None:
        with self._lock:
            self.reads.append((partition, offset, value))

    # --- checks ----------------------------------------------------------------------------

    def check(self) -> TxnVerdict:
        with self._lock:
            return self._check()

    def _check(self) -> TxnVerdict:
        final_values = Counter(v for _, _, v in self.final)
        uncommitted, phantom = [], []
        for where, rows in (("final", self.final), ("run", self.reads)):
            for partition, offset, value in rows:
                _, key = split_output(value)
                txn = self.txns.get(key)
                if txn is None or txn.outputs.get(value) != partition:
                    phantom.append(f"{value} at {partition}/{offset} ({where})")
                elif txn.outcome in NEVER_COMMITTED:
                    uncommitted.append(f"{value} at {partition}/{offset} ({where}, {txn.outcome})")
                elif where == "run" and value not in final_values:
                    uncommitted.append(f"{value} at {partition}/{offset} (run, later gone)")
        partial, committed_missing = [], []
        for txn in self.txns.values():
            seen = [v for v in txn.outputs if v in final_values]
            if seen and len(seen) < len(txn.outputs):
                partial.append(f"{txn.key} ({txn.outcome}): {len(seen)} of {len(txn.outputs)}")
            if txn.outcome == "committed" and len(seen) < len(txn.outputs):
                committed_missing.append(f"{txn.key}: {len(seen)} of {len(txn.outputs)}")
        outputs_of: dict[str, list[str]] = defaultdict(list)
        for value, n in final_values.items():
            input_value, key = split_output(value)
            outputs_of[input_value] += [key] * n
        duplicated = [f"{i}: {keys}" for i, keys in outputs_of.items() if len(keys) > 1]
        missing = [v for v in self.inputs.values() if v not in outputs_of]
        return TxnVerdict(
            self.name,
            inputs=len(self.inputs),
            transactions=dict(Counter(t.outcome for t in self.txns.values())),
            outputs_read=len(self.final),
            uncommitted_read=uncommitted,
            phantom=phantom,
            partial=partial,
            committed_missing=committed_missing,
            duplicated=duplicated,
            missing=missing,
            offsets_apart=self._offsets_apart(final_values),
        )

    def _offsets_apart(self, final_values: Counter) -> list[str]:
        """Committed offsets and committed outputs must move together."""
        # input value -> incarnations whose committed output of it is in the final log
        done_by: dict[str, set[int]] = defaultdict(set)
        for value in final_values:
            input_value, key = split_output(value)
            txn = self.txns.get(key)
            if txn is not None:
                done_by[input_value].add(txn.incarnation)
        out = []
        for incarnation, committed in self.resumes:
            for (partition, offset), value in sorted(self.inputs.items()):
                earlier = any(i < incarnation for i in done_by.get(value, ()))
                below = offset < committed.get(partition, 0)
                if below and not earlier:
                    out.append(
                        f"incarnation {incarnation} resumed {partition} at "
                        f"{committed.get(partition, 0)}: {value} at {offset} has no output"
                    )
                elif earlier and not below:
                    out.append(
                        f"incarnation {incarnation} resumed {partition} at "
                        f"{committed.get(partition, 0)}: {value} at {offset} already output"
                    )
        for partition, end in sorted(self.input_ends.items()):
            at = self.committed_offsets.get(partition)
            if at != end:
                out.append(f"at the end partition {partition} committed at {at}, input ends {end}")
        return out


__all__ = ["NEVER_COMMITTED", "OUTCOMES", "Txn", "TxnHistory", "TxnVerdict", "split_output"]
