"""The Spark benchmark's single-machine peer: the lag and throughput jobs' results computed in
one process with ``pyarrow.compute`` over the same Parquet files, as an engineer without a
cluster would write them.

The work that grows with the records is vectorised; the rest is over small tables. One file is
one partition's log (``bench.spark.generate`` writes it so). Two threads (the cores
``local[2]`` gets) each take the next file and read it ``BATCH_ROWS`` records at a time
(``offset``, ``timestamp``, ``key``, ``value``, ``headers`` when present), so memory stays flat
whatever the size:

- a record's payload is ``binary_length`` of its key, value and headers (nulls count 0),
  never a Python object;
- each record's *slot* is its minute and its commit interval (``search_sorted`` against the
  partition's commit times), the slices of ``spark.transforms.lag`` without the second; one
  hash ``group_by`` per batch gives each slot's records, bytes, last timestamp and offsets,
  summed again per partition;
- ``is_in`` picks the records at committed offsets (their timestamps give the time lag).

From then on the rows are a partition's slots (minutes plus commits) and its commits: the
minutes and the log end at each commit are summed from the slots, the samples are merged per
group as ``lag_samples`` defines them, and each sample is evaluated over its window with the
Burrow rules in one pass per history (``bench.burrow_window``: prefix counts, equal to
``spark.transforms.burrow.evaluate``, which still gives the status at ``now``), then hours,
peaks and skew. The result has the
shape of ``bench.spark.spark_jobs``'s, so the two compare row by row.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.burrow_window import evaluate_windows
from spark.transforms.burrow import Sample, evaluate

MINUTE, HOUR = 60_000, 3_600_000
BATCH_ROWS = 65_536  # records decoded at a time: the columns stay in cache, memory stays flat


@dataclass(frozen=True)
class Settings:
    """What the jobs are asked: evaluation time, Burrow window, STOP floor, hot threshold and
    the partition count of every topic (idle partitions count toward the fair share)."""

    now_ms: int
    window: int
    min_stop_ms: int
    hot_factor: float
    partitions: dict[tuple[str, str], int]


def baseline_jobs(base: Path, settings: Settings, threads: int = 2) -> dict:
    """The lag and throughput results of ``base/records/*.parquet`` (one partition per file)
    and ``base/commits.parquet``."""
    commits = _commits(pq.read_table(base / "commits.parquet"))
    paths = sorted((base / "records").glob("*.parquet"))
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda p: _partition(p, commits, settings), paths))
    minute: dict = {}
    history: list = []
    status: dict = {}
    for part_minute, part_history, part_status in parts:
        minute.update(part_minute)
        history.extend(part_history)
        status.update(part_status)
    hour: dict = defaultdict(lambda: [0, 0])
    for (ten, top, p, m), (n, size) in minute.items():
        acc = hour[(ten, top, p, m - m % HOUR)]
        acc[0] += n
        acc[1] += size
    return {
        "history": history,
        "status": status,
        "minute": minute,
        "hour": {k: tuple(v) for k, v in hour.items()},
        "peaks": _peaks(minute),
        "skew": _skew(hour, settings),
    }


def _commits(table: pa.Table) -> dict:
    """(tenant, topic, partition) -> group -> [(commit ms, committed offset)]; tombstones out."""
    table = table.filter(pc.is_valid(table.column("committed_offset")))
    out: dict = defaultdict(lambda: defaultdict(list))
    columns = [table.column(n).to_pylist() for n in ("tenant", "group", "topic", "partition")]
    for ten, g, top, p, off, ts in zip(
        *columns,
        table.column("committed_offset").to_pylist(),
        table.column("commit_timestamp").cast(pa.int64()).to_pylist(),
        strict=True,
    ):
        out[(ten, top, p)][g].append((ts, off))
    return out


def _partition(path: Path, commits: dict, settings: Settings) -> tuple[dict, list, dict]:
    """One partition's minutes, lag history and status at ``now``."""
    scanned = _scan(path, commits)
    if scanned is None:
        return {}, [], {}
    tp, groups, commit_ts, slots, rec_ms = scanned
    log_start = pc.min(slots.column("bottom_min")).as_py()

    buckets: dict[int, list[int]] = {}  # minute -> [records, bytes, last ts, log end]
    end_at = [0] * len(commit_ts)  # largest end of records stamped in (previous, this]
    for n, size, last, top in zip(
        *(slots.column(c).to_pylist() for c in ("records_sum", "bytes_sum", "last_max")),
        slots.column("top_max").to_pylist(),
        strict=True,
    ):
        end = top + 1
        m = last - last % MINUTE
        acc = buckets.get(m)
        if acc is None:
            buckets[m] = [n, size, last, end]
        else:
            acc[0] += n
            acc[1] += size
            acc[2] = max(acc[2], last)
            acc[3] = max(acc[3], end)
        i = bisect.bisect_left(commit_ts, last)
        if i < len(commit_ts):
            end_at[i] = max(end_at[i], end)

    minute = {(*tp, m): (n, size) for m, (n, size, _, _) in buckets.items()}
    log_end_at, running = {}, 0
    for ts, e in zip(commit_ts, end_at, strict=True):
        running = max(running, e)
        log_end_at[ts] = running
    moves, running = [], 0
    for _, _, last, e in sorted(buckets.values(), key=lambda a: a[2]):
        running = max(running, e)
        moves.append((last, False, None, running))
    history, status = [], {}
    for group, cs in groups.items():
        events = sorted(
            moves + [(ts, True, off, log_end_at[ts]) for ts, off in cs],
            key=lambda e: (e[0], e[1]),
        )
        samples = _samples(tp, group, events, rec_ms)
        history.extend(_evaluated(samples, settings))
        status[(tp[0], group, tp[1], tp[2])] = _status(samples, log_start, settings)
    return minute, history, status


def _scan(path: Path, commits: dict) -> tuple | None:
    """The one pass over a partition file: its (tenant, topic, partition), its groups'
    commits, their distinct times, the per-slot sums and the timestamps of the records at
    committed offsets; None for an empty file."""
    f = pq.ParquetFile(path, read_dictionary=["tenant", "topic"])
    columns = ["tenant", "topic", "partition", "offset", "timestamp", "key", "value"]
    if "headers" in f.schema_arrow.names:
        columns.append("headers")
    batches = f.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    first = next(batches, None)
    if first is None:
        return None
    tp = tuple(first.column(n)[0].as_py() for n in ("tenant", "topic", "partition"))
    groups = commits.get(tp, {})
    commit_ts = sorted({ts for cs in groups.values() for ts, _ in cs})
    wanted = pa.array({off for cs in groups.values() for _, off in cs}, pa.int64())
    parts, at = [], []
    for batch in itertools.chain([first], batches):
        parts.append(_batch_slots(batch, commit_ts))
        offsets = batch.column("offset")
        hit = pc.is_in(offsets, value_set=wanted)
        at.append((offsets.filter(hit), batch.column("timestamp").filter(hit).cast(pa.int64())))
    slots = (
        pa.concat_tables(parts)
        .group_by("slot", use_threads=False)
        .aggregate(
            [
                ("records", "sum"),
                ("bytes", "sum"),
                ("last", "max"),
                ("top", "max"),
                ("bottom", "min"),
            ]
        )
    )
    rec_ms = {
        o: ts for offs, ms in at for o, ts in zip(offs.to_pylist(), ms.to_pylist(), strict=True)
    }
    return tp, groups, commit_ts, slots, rec_ms


def _batch_slots(batch: pa.RecordBatch, commit_ts: list[int]) -> pa.Table:
    """A batch of records summed per slot: records, payload bytes, last timestamp, largest
    and smallest offset. A slot is a minute and a commit interval, (previous commit, commit]
    (or after the last), keyed ``minute * (commits + 1) + interval``."""
    stamps = batch.column("timestamp").cast(pa.int64())
    minutes = pc.divide(pc.subtract(stamps, pc.modulo(stamps, MINUTE)), MINUTE)
    interval = pc.search_sorted(pa.array(commit_ts, pa.int64()), stamps, side="left")
    slot = pc.add(pc.multiply(minutes, len(commit_ts) + 1), interval.cast(pa.int64()))
    size = pc.add(
        pc.coalesce(pc.binary_length(batch.column("key")), 0),
        pc.coalesce(pc.binary_length(batch.column("value")), 0),
    )
    offsets = batch.column("offset")
    slots = (
        pa.table({"slot": slot, "ts": stamps, "offset": offsets, "size": size})
        .group_by("slot", use_threads=False)
        .aggregate(
            [
                ("offset", "count"),
                ("size", "sum"),
                ("ts", "max"),
                ("offset", "max"),
                ("offset", "min"),
            ]
        )
        .rename_columns(["slot", "records", "bytes", "last", "top", "bottom"])
    )
    if "headers" not in batch.schema.names:
        return slots
    return pa.concat_tables([slots, _header_slots(batch.column("headers"), slot, slots.schema)])


def _header_slots(headers: pa.Array, slot: pa.Array, schema: pa.Schema) -> pa.Table:
    """Every header's key and value bytes summed per slot of its record, as rows of no
    records that the partition's final sum adds to the slots."""
    flat = pc.list_flatten(headers)
    per_header = pa.table(
        {
            "slot": pc.take(slot, pc.list_parent_indices(headers)),
            "bytes": pc.add(
                pc.coalesce(pc.binary_length(pc.struct_field(flat, "key")), 0),
                pc.coalesce(pc.binary_length(pc.struct_field(flat, "value")), 0),
            ),
        }
    )
    sums = per_header.group_by("slot", use_threads=False).aggregate([("bytes", "sum")])
    n = sums.num_rows
    none = pa.nulls(n, pa.int64())
    return pa.Table.from_arrays(
        [sums.column(0), pa.repeat(0, n).cast(pa.int64()), sums.column(1), none, none, none],
        schema=schema,
    )


def _samples(tp: tuple, group: str, events: list, rec_ms: dict) -> list[tuple]:
    """(key, ts, committed, log_end, lag, time_lag, is_commit, last_commit) from the group's
    first commit on, as ``lag_samples`` defines them."""
    out, committed, log_end, last_commit = [], None, 0, None
    key = (tp[0], group, tp[1], tp[2])
    for ts, is_commit, off, end in events:
        if is_commit:
            committed = off
            last_commit = ts if last_commit is None else max(last_commit, ts)
        log_end = max(log_end, end)
        if committed is None:
            continue
        lag = max(log_end - committed, 0)
        at = rec_ms.get(committed)
        time_lag = 0 if lag == 0 or at is None else max(ts - at, 0)
        out.append((key, ts, committed, log_end, lag, time_lag, is_commit, last_commit))
    return out


def _evaluated(samples: list[tuple], settings: Settings) -> list[tuple]:
    """Each sample with its evaluation over itself and the samples before it, at its time."""
    if not samples:
        return []
    columns = list(zip(*samples, strict=True))
    evaluations = evaluate_windows(
        columns[1],
        columns[2],
        columns[3],
        columns[6],
        columns[7],
        window=settings.window,
        min_stop_ms=settings.min_stop_ms,
    )
    return [(*s, *e) for s, e in zip(samples, evaluations, strict=True)]


def _status(samples: list[tuple], log_start: int | None, settings: Settings) -> tuple:
    """The key's last sample at or before ``now``, evaluated at ``now`` with the log start."""
    recent = [s for s in samples if s[1] <= settings.now_ms][-settings.window :]
    last = recent[-1]
    e = evaluate(
        [Sample(s[1], s[2], s[3], s[6]) for s in recent],
        now_ms=settings.now_ms,
        last_commit_ms=last[7],
        min_stop_ms=settings.min_stop_ms,
        log_start_offset=log_start,
    )
    return (last[2], last[3], last[4], last[5], last[1], last[7], log_start, e.status,
            e.consume_rate, e.produce_rate, e.catch_up_s)  # fmt: skip


def _peaks(minute: dict) -> dict:
    """Per topic: the busiest minute (earliest on ties), its records, the most bytes in a
    minute and the mean records per minute with traffic."""
    per_topic: dict = defaultdict(lambda: [0, 0])
    for (ten, top, _, m), (n, size) in minute.items():
        acc = per_topic[(ten, top, m)]
        acc[0] += n
        acc[1] += size
    out: dict = {}
    for (ten, top, m), (n, size) in per_topic.items():
        acc = out.setdefault((ten, top), [m, n, size, 0, 0])
        if n > acc[1] or (n == acc[1] and m < acc[0]):
            acc[0], acc[1] = m, n
        acc[2] = max(acc[2], size)
        acc[3] += n
        acc[4] += 1
    return {k: (m, n, size, total / periods) for k, (m, n, size, total, periods) in out.items()}


def _skew(hour: dict, settings: Settings) -> dict:
    """Per topic and hour: the busiest partition (lowest on ties), its share, share x the
    topic's partition count, and the partition when that reaches the hot factor."""
    busiest: dict = {}
    totals: Counter = Counter()
    for (ten, top, p, h), (n, _) in hour.items():
        key = (ten, top, h)
        totals[key] += n
        best = busiest.get(key)
        if best is None or n > best[1] or (n == best[1] and p < best[0]):
            busiest[key] = (p, n)
    out = {}
    for (ten, top, h), (p, n) in busiest.items():
        share = n / totals[(ten, top, h)]
        skew = share * settings.partitions[(ten, top)]
        out[(ten, top, h)] = (p, share, skew, p if skew >= settings.hot_factor else None)
    return out
