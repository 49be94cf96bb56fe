"""The message browser's scan: one partition or every partition of a topic, newest first
(``start=latest``) or oldest first (from the earliest offset, an offset or a time), with
filters, a bounded amount of work per request and a cursor to go on from.

How a page is made (docs/console.md, "Message browser"):

- Each selected partition is scanned on its own, in a small thread pool: newest first reads
  windows backwards from the partition's end (the high watermark, or the cursor), oldest first
  reads forwards from its start. A partition stops when it holds ``limit`` matches, reaches
  the end of its range, or spends its share of the scan budget (``scan_budget`` records split
  evenly over the partitions) or the request's time.
- The partitions' matches are merged by timestamp (a k-way merge that keeps each partition's
  own order), and the merge stops at ``limit`` records, at ``RESPONSE_BYTES`` of keys and
  values, or where a partition that stopped early ran out of matches in hand: what it has not
  read could sort before the next record, so the page ends there rather than show a wrong
  order.
- The cursor holds, per partition still to read, where the next page starts (newest first:
  the offset the next window ends before; oldest first: the next offset to read).
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from backend.console import brokers
from backend.console.filters import JsonPath, as_text, header_matches, json_path_matches
from backend.core.exceptions import ApplicationError
from backend.topics.models import Topic
from brokernodes.client.partitioner import partition_for_key

PAGE_RECORDS = 500  # records asked of a broker per fetch
DEFAULT_SCAN_BUDGET = 10_000  # records read per request, over all partitions
MAX_SCAN_BUDGET = 50_000
MAX_PARTITIONS = 256  # partitions holding records that one "all partitions" page reads
RESPONSE_BYTES = 4 * 1024 * 1024  # keys and values returned per page at most
DEADLINE_S = 8.0  # a person waits on the page
WORKERS = 8
_CURSOR = re.compile(r"^\d{1,9}:\d{1,19}(,\d{1,9}:\d{1,19})*$")
MAX_CURSOR_LENGTH = 64_000


@dataclass
class BrowseQuery:
    partition: int | None = None  # None: every partition (or the key's)
    start: str = "latest"  # latest (newest first) | earliest | offset | timestamp
    offset: int | None = None
    timestamp: int | None = None  # epoch ms
    limit: int = 50
    key: str | None = None
    header_name: str | None = None
    header_value: str | None = None
    json_path: JsonPath | None = None
    json_value: str | None = None
    cursor: dict[int, int] | None = None
    scan_budget: int = DEFAULT_SCAN_BUDGET

    @property
    def newest_first(self) -> bool:
        return self.start == "latest"


@dataclass
class _Part:
    partition: int
    url: str | None
    low: int = 0  # log start offset
    high: int = 0  # high watermark
    begin: int = 0  # where this page's range starts (newest first: its lower bound)
    end: int = 0  # where it ends (newest first: the first window ends before it)
    matches: list[dict] = field(default_factory=list)  # in scan order
    position: int = 0  # how far the scan got (newest first: lowest offset read)
    scanned: int = 0
    unavailable: str | None = None


def parse_cursor(text: str) -> dict[int, int]:
    """``"0:120,2:7"`` -> ``{0: 120, 2: 7}``; ``ApplicationError`` on anything else."""
    if len(text) > MAX_CURSOR_LENGTH or not _CURSOR.match(text):
        raise ApplicationError(
            "the cursor is not one this browser gave: search again from the start",
            {"cursor": ["expected partition:offset pairs, as a previous answer gave"]},
        )
    out: dict[int, int] = {}
    for pair in text.split(","):
        p, o = pair.split(":")
        out[int(p)] = int(o)
    return out


def format_cursor(positions: dict[int, int]) -> str | None:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items())) or None


def _key_text(record: dict) -> str | None:
    key, fmt = record.get("key"), record.get("key_format")
    if key is None:
        return None
    if fmt == "base64":
        try:
            return base64.b64decode(key).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return as_text(key)


def keep(record: dict, q: BrowseQuery) -> bool:
    if q.key is not None and _key_text(record) != q.key:
        return False
    if q.header_name and not header_matches(record.get("headers"), q.header_name, q.header_value):
        return False
    return q.json_path is None or json_path_matches(
        q.json_path, record.get("value"), record.get("value_format", ""), q.json_value
    )


def selected_partitions(topic: Topic, q: BrowseQuery) -> list[int]:
    """The key's partition (murmur2, as Kafka's default partitioner), the chosen one, or all."""
    if q.key is not None:
        return [partition_for_key(q.key.encode("utf-8"), topic.partitions)]
    if q.partition is not None:
        if not 0 <= q.partition < topic.partitions:
            raise ApplicationError(
                f"{topic.name!r} has partitions 0 to {topic.partitions - 1}",
                {"partition": ["no such partition"]},
            )
        return [q.partition]
    return list(range(topic.partitions))


def browse(*, token: str, topic: Topic, q: BrowseQuery) -> dict:
    """One page of the message browser (the module docstring says how)."""
    chosen = selected_partitions(topic, q)
    if q.cursor is not None:
        stray = sorted(set(q.cursor) - set(chosen))
        if stray:
            raise ApplicationError(
                f"the cursor names partition {stray[0]}, which this search does not read",
                {"cursor": ["does not match the partition filter: search again"]},
            )
        chosen = sorted(q.cursor)
    parts = _locate(topic, chosen, token)
    _set_ranges(parts, q, token, topic.name)
    busy = [p for p in parts if p.unavailable is None and p.begin < p.end]
    if len(busy) > MAX_PARTITIONS:
        raise ApplicationError(
            f"{len(busy)} partitions of {topic.name!r} hold records in this range; browsing "
            f"every partition reads at most {MAX_PARTITIONS}: choose one partition",
            {"partition": [f"choose one: more than {MAX_PARTITIONS} to read"]},
        )
    share = max(1, q.scan_budget // max(1, len(busy)))
    deadline = time.monotonic() + DEADLINE_S
    if busy:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(busy))) as pool:
            list(pool.map(lambda p: _scan(p, q, token, topic.name, share, deadline), busy))
    records, taken = _merge(parts, q)
    cursor = _next_cursor(parts, taken, q)
    unavailable = [p for p in parts if p.unavailable]
    return {
        "topic": topic.name,
        "order": "newest_first" if q.newest_first else "oldest_first",
        "key_partition": q.key is not None,
        "partitions": [
            {
                "partition": p.partition,
                "log_start_offset": p.low,
                "high_watermark": p.high,
                "scanned": p.scanned,
                "to_scan": max(0, p.end - p.begin),
                "unavailable": p.unavailable,
            }
            for p in parts
        ],
        "records": records,
        "scanned": sum(p.scanned for p in parts),
        "to_scan": sum(max(0, p.end - p.begin) for p in parts),
        "scan_budget": q.scan_budget,
        "cursor": cursor,
        "reached_end": cursor is None
        or all(
            p.unavailable or (not q.newest_first and cursor_at(cursor, p.partition) >= p.high)
            for p in parts
        ),
        "unavailable": "; ".join(p.unavailable for p in unavailable)
        if unavailable and len(unavailable) == len(parts)
        else None,
    }


def cursor_at(cursor: str, partition: int) -> int:
    return parse_cursor(cursor).get(partition, -1)


def _locate(topic: Topic, chosen: list[int], token: str) -> list[_Part]:
    """Each partition's leader, and its offsets from one metadata call per leader broker."""
    parts = []
    for p in chosen:
        try:
            parts.append(_Part(p, brokers.leader_url(topic, p)))
        except brokers.BrokerError as e:
            if e.error_code != "LEADER_NOT_AVAILABLE":
                raise
            parts.append(_Part(p, None, unavailable=e.message))
    by_url: dict[str, list[_Part]] = {}
    for p in parts:
        if p.url is not None:
            by_url.setdefault(p.url, []).append(p)
    for url, group in by_url.items():
        known: dict[int, dict] = {}
        try:
            for t in brokers.metadata(url, token).get("topics", []):
                if t.get("name") == topic.name:
                    known = {int(x["partition"]): x for x in t.get("partitions", [])}
        except brokers.BrokerError:
            known = {}
        for p in group:
            m = known.get(p.partition) or {}
            if m.get("log_start_offset") is not None and m.get("high_watermark") is not None:
                p.low, p.high = int(m["log_start_offset"]), int(m["high_watermark"])
            else:  # not in its answer (a leader just moved): ask the partition itself
                try:
                    p.low = brokers.list_offset(url, token, topic.name, p.partition, "earliest")
                    p.high = brokers.list_offset(url, token, topic.name, p.partition, "latest")
                except brokers.BrokerError as e:
                    p.unavailable = f"partition {p.partition}: {e.message}"
    return parts


def _set_ranges(parts: list[_Part], q: BrowseQuery, token: str, topic: str) -> None:
    for p in parts:
        if p.unavailable:
            continue
        if q.newest_first:
            top = q.cursor[p.partition] if q.cursor is not None else p.high
            p.begin, p.end = p.low, min(max(top, p.low), p.high)
            p.position = p.end
            continue
        if q.cursor is not None:
            start = q.cursor[p.partition]
        elif q.start == "offset":
            start = q.offset or 0
        elif q.start == "timestamp":
            try:
                start = brokers.list_offset(p.url, token, topic, p.partition, str(q.timestamp))
            except brokers.BrokerError as e:
                p.unavailable = f"partition {p.partition}: {e.message}"
                continue
            start = p.high if start < 0 else start
        else:
            start = p.low
        p.begin, p.end = min(max(start, p.low), p.high), p.high
        p.position = p.begin


def _read(p: _Part, token: str, topic: str, start: int, stop: int) -> list[dict]:
    """Records with offsets in [start, stop) (fewer when the log has gaps)."""
    out: list[dict] = []
    pos = start
    while pos < stop:
        page = brokers.fetch_records(
            p.url, token, topic, p.partition, pos, min(PAGE_RECORDS, stop - pos)
        )
        records = page.get("records") or []
        out.extend(r for r in records if int(r["offset"]) < stop)
        following = int(page.get("next_offset", pos))
        if not records or following <= pos:
            break
        pos = following
    return out


def _scan(p: _Part, q: BrowseQuery, token: str, topic: str, share: int, deadline: float) -> None:
    """Fill ``p.matches`` until ``limit`` matches, the end of the range, ``share`` records
    read or the deadline; a broker error marks the partition unavailable."""
    window = max(1, min(q.limit, share))
    try:
        while len(p.matches) < q.limit and p.scanned < share and time.monotonic() < deadline:
            size = min(window, share - p.scanned)
            if q.newest_first:
                if p.position <= p.begin:
                    break
                lo = max(p.begin, p.position - size)
                got = _read(p, token, topic, lo, p.position)
                p.position = lo
                got.reverse()
            else:
                if p.position >= p.end:
                    break
                hi = min(p.end, p.position + size)
                got = _read(p, token, topic, p.position, hi)
                p.position = hi if not got else max(hi, int(got[-1]["offset"]) + 1)
            p.scanned += len(got)
            p.matches.extend({"partition": p.partition, **r} for r in got if keep(r, q))
            window = PAGE_RECORDS
    except brokers.BrokerError as e:
        p.unavailable = f"partition {p.partition}: {e.message}"


def _exhausted(p: _Part, q: BrowseQuery) -> bool:
    """Whether the scan read this partition's whole range."""
    if p.unavailable:
        return True
    return p.position <= p.begin if q.newest_first else p.position >= p.end


def _size(r: dict) -> int:
    return sum(
        len(v) if isinstance(v, str) else len(json.dumps(v)) if v is not None else 0
        for v in (r.get("key"), r.get("value"))
    )


def _merge(parts: list[_Part], q: BrowseQuery) -> tuple[list[dict], dict[int, int]]:
    """Up to ``limit`` records merged by timestamp; and how many each partition gave."""
    sign = -1 if q.newest_first else 1
    heap = [(sign * p.matches[0]["timestamp"], p.partition, 0) for p in parts if p.matches]
    heapq.heapify(heap)
    by_id = {p.partition: p for p in parts}
    taken = {p.partition: 0 for p in parts}
    out: list[dict] = []
    used = 0
    stalled = [p for p in parts if not p.matches and not _exhausted(p, q)]
    while heap and len(out) < q.limit and not stalled:
        _, pid, i = heapq.heappop(heap)
        r = by_id[pid].matches[i]
        used += _size(r)
        if out and used > RESPONSE_BYTES:
            break
        out.append(r)
        taken[pid] = i + 1
        p = by_id[pid]
        if i + 1 < len(p.matches):
            heapq.heappush(heap, (sign * p.matches[i + 1]["timestamp"], pid, i + 1))
        elif not _exhausted(p, q):
            stalled.append(p)  # what it has not read may sort next: stop here
    return out, taken


def _next_cursor(parts: list[_Part], taken: dict[int, int], q: BrowseQuery) -> str | None:
    positions: dict[int, int] = {}
    for p in parts:
        if p.unavailable:
            if q.cursor is not None and p.partition in q.cursor:
                positions[p.partition] = q.cursor[p.partition]  # try it again next page
            continue
        n = taken.get(p.partition, 0)
        if n < len(p.matches):  # left out by the merge: the next page starts at it
            last = p.matches[n - 1]["offset"] if n else None
            if q.newest_first:
                positions[p.partition] = int(last) if last is not None else p.end
            else:
                positions[p.partition] = int(last) + 1 if last is not None else p.begin
        elif q.newest_first:
            if p.position > p.begin:
                positions[p.partition] = p.position
        else:
            positions[p.partition] = p.position
    return format_cursor(positions)
