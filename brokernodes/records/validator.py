"""Produce-time validation of the records inside a batch, as Kafka's ``LogValidator`` does.

``header.validate_batch`` checks a batch's frame (length, magic, CRC, counts). A batch can
pass all of that and still hold garbage: a record count that disagrees with the records, a
record length that runs past the batch, a varint that never ends, or timestamps at the
int64 limits. Readers (JSON fetch, the group-lag refresh, the Spark jobs) would then fail on
it for every tenant. ``validate_records`` walks each record's fields once, without building
any object, and refuses the batch with:

- ``CORRUPT_MESSAGE`` when the records section does not parse: a count that disagrees with
  the records present, a length or varint out of range or past the record's end, offset
  deltas other than 0, 1, 2, ... (what every producer writes);
- ``INVALID_TIMESTAMP`` when a timestamp lies more than ``message.timestamp.before.max.ms``
  before or ``message.timestamp.after.max.ms`` after the broker's clock (KIP-937);
- ``INVALID_RECORD`` when a compacted topic gets a record without a key, or a client sends a
  control batch (Kafka's validator refuses those too);
- ``MESSAGE_TOO_LARGE`` when a compressed records section inflates past the limit
  (``compression.decompress``, the one place that inflates).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from brokernodes.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from brokernodes.records.compression import Compression, decompress
from brokernodes.records.header import HEADER_SIZE, BatchHeader

NO_TIMESTAMP = -1
MAX_LONG = 2**63 - 1
DEFAULT_TIMESTAMP_BEFORE_MAX_MS = MAX_LONG  # Kafka 3.6+: no lower bound
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000  # Kafka 3.6+: at most one hour ahead


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a partition's records must satisfy (from its topic config and the broker's)."""

    max_inflated_bytes: int
    timestamp_before_max_ms: int = DEFAULT_TIMESTAMP_BEFORE_MAX_MS
    timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS
    require_keys: bool = False  # compacted topics: every record needs a key


def validate_records(
    buf: bytes | bytearray, header: BatchHeader, rules: RecordRules, now_ms: int
) -> None:
    """Check the records of the batch ``header`` describes in ``buf``; raise if one is bad.

    A compressed records section is inflated (bounded by ``rules.max_inflated_bytes``) and
    every field of every record is checked, as for a compacted topic (which needs the keys).
    An uncompressed batch otherwise gets the cheap pass, ``walk_lengths``: the broker's hot
    path stays at one varint chain per batch and the CRC already vouches for the bytes.
    ``buf`` is a ``bytes`` or ``bytearray`` (indexing a memoryview is slower).
    """
    if header.is_control:
        raise InvalidRecordError(
            f"the batch at byte {header.position} is a control batch (attributes bit 5): "
            f"transaction markers are written by the broker, never produced"
        )
    start = header.position + HEADER_SIZE
    stop = header.position + header.size
    if header.compression != Compression.NONE:
        data: bytes | bytearray = decompress(
            header.compression, memoryview(buf)[start:stop], rules.max_inflated_bytes
        )
        start, stop = 0, len(data)
        lowest, highest, keyless = walk_records(data, start, stop, header.records_count)
    elif rules.require_keys:
        lowest, highest, keyless = walk_records(buf, start, stop, header.records_count)
    else:
        lowest, highest, keyless = walk_lengths(buf, start, stop, header.records_count)
    where = f"batch at byte {header.position}"
    if keyless is not None and rules.require_keys:
        raise InvalidRecordError(
            f"the topic is compacted: every record needs a key; record {keyless} of the {where} "
            f"has none"
        )
    if header.timestamp_type:  # LogAppendTime: readers see the batch's max timestamp
        lowest = highest = header.max_timestamp
    else:
        base = header.base_timestamp
        lowest = NO_TIMESTAMP if lowest is None else base + lowest
        highest = max(header.max_timestamp, NO_TIMESTAMP if highest is None else base + highest)
    _check_timestamps(lowest, highest, rules, now_ms, where)


def _check_timestamps(
    lowest: int, highest: int, rules: RecordRules, now_ms: int, where: str
) -> None:
    """KIP-937: refuse timestamps too far behind or ahead of ``now_ms`` (-1, none, passes)."""
    if highest != NO_TIMESTAMP and highest - now_ms > rules.timestamp_after_max_ms:
        raise InvalidTimestampError(
            f"the {where} has timestamp {highest}, {highest - now_ms} ms after the broker's "
            f"clock ({now_ms}); message.timestamp.after.max.ms="
            f"{rules.timestamp_after_max_ms}"
        )
    if lowest != NO_TIMESTAMP and now_ms - lowest > rules.timestamp_before_max_ms:
        raise InvalidTimestampError(
            f"the {where} has timestamp {lowest}, {now_ms - lowest} ms before the broker's "
            f"clock ({now_ms}); message.timestamp.before.max.ms="
            f"{rules.timestamp_before_max_ms}"
        )


def walk_records(
    data: bytes | bytearray, pos: int, end: int, count: int
) -> tuple[int | None, int | None, int | None]:
    """Walk ``count`` records filling ``data[pos:end]`` exactly, checking every field.

    Returns the lowest and highest timestamp delta (None without records) and the index of
    the first keyless record (None if every record has a key). One pass, no slicing: varints
    of one or two bytes are read inline, longer ones by ``_varint``.
    """
    lowest: int | None = None
    highest: int | None = None
    keyless: int | None = None
    slow = _varint
    try:
        for index in range(count):
            if pos >= end:
                raise CorruptRecordError(
                    f"the batch declares {count} records but holds only {index}"
                )
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 5)
            record_end = pos + (z >> 1)
            if z & 1 or z < 12 or record_end > end:  # length >= 6: the smallest record
                raise CorruptRecordError(
                    f"record {index} declares length {(z >> 1) ^ -(z & 1)} but "
                    f"{end - pos} bytes remain in the batch"
                )
            # attributes (unused), then timestampDelta (varlong)
            z = data[pos + 1]
            if z < 0x80:
                pos += 2
            elif data[pos + 2] < 0x80:
                z = (z & 0x7F) | (data[pos + 2] << 7)
                pos += 3
            else:
                z, pos = slow(data, pos + 1, 10)
            delta = (z >> 1) ^ -(z & 1)
            if lowest is None:
                lowest = highest = delta
            elif delta < lowest:
                lowest = delta
            elif delta > highest:  # type: ignore[operator]
                highest = delta
            # offsetDelta: must be the record's index
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 5)
            if z != index << 1:
                raise CorruptRecordError(
                    f"record {index} has offset delta {(z >> 1) ^ -(z & 1)}, not {index}"
                )
            # key, value: length -1 (null) or a length that fits the record
            z = data[pos]
            if z == 1:
                if keyless is None:
                    keyless = index
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    z = (z & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = slow(data, pos, 5)
                if z & 1:
                    raise CorruptRecordError(f"record {index} has key length {-(z + 1) // 2}")
                pos += z >> 1
            z = data[pos]
            if z == 1:
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    z = (z & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = slow(data, pos, 5)
                if z & 1:
                    raise CorruptRecordError(f"record {index} has value length {-(z + 1) // 2}")
                pos += z >> 1
            # headers
            if data[pos] == 0:
                pos += 1
            else:
                pos = _walk_headers(data, pos, record_end, index)
            if pos != record_end:
                raise CorruptRecordError(
                    f"record {index}'s fields end {pos - record_end:+d} bytes from the end "
                    f"its length declares"
                )
    except IndexError:
        raise CorruptRecordError("a record runs past the end of the batch") from None
    if pos != end:
        raise CorruptRecordError(
            f"the batch declares {count} records but {end - pos} bytes follow them"
        )
    return lowest, highest, keyless


# ``_walk_uniform`` takes batches of up to this many records; the offset delta varint grows a
# byte at record 64 and at record 8192 (zigzag 2**7 and 2**14), so a batch is up to three runs
_UNIFORM_MAX_RECORDS = 1 << 17
# the first record whose offset delta varint has 1, 2 and 3 bytes, and the end
_OFFSET_WIDTH_STARTS = (0, 64, 8192, _UNIFORM_MAX_RECORDS)
_ZIGZAG_1 = tuple((z >> 1) ^ -(z & 1) for z in range(0x80))  # one-byte varint -> value


@functools.cache
def _offset_bytes(width: int) -> tuple[bytes, ...]:
    """Byte k (k < ``width``) of the offset delta varint of every record whose varint has
    ``width`` bytes, one ``bytes`` per k, from the first such record on (built on first use:
    the three-byte table is about 370 KiB)."""
    first, stop = _OFFSET_WIDTH_STARTS[width - 1], _OFFSET_WIDTH_STARTS[width]
    return tuple(
        bytes(
            (((i << 1) >> (7 * k)) & 0x7F) | (0x80 if k < width - 1 else 0)
            for i in range(first, stop)
        )
        for k in range(width)
    )


def walk_lengths(
    data: bytes | bytearray, pos: int, end: int, count: int
) -> tuple[int | None, int | None, None]:
    """The cheap pass for uncompressed batches: each record's length, timestamp delta and
    offset delta, then a jump to the next record; the lengths must chain to exactly ``end``
    in ``count`` records. Fields inside a record (key, value, headers) are not read.

    Returns what ``walk_records`` does, with None for the keyless record (not looked at).
    A batch of records all of one length is checked by ``_walk_uniform`` without a loop
    over its records; any other batch, and every one it declines (a bad one included, for
    the error naming the record), by the loop below.
    """
    uniform = _walk_uniform(data, pos, end, count)
    if uniform is not None:
        return uniform
    lowest: int | None = None
    highest: int | None = None
    slow = _varint
    try:
        for index in range(count):
            if pos >= end:
                raise CorruptRecordError(
                    f"the batch declares {count} records but holds only {index}"
                )
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 5)
            record_end = pos + (z >> 1)
            if z & 1 or z < 12 or record_end > end:
                raise CorruptRecordError(
                    f"record {index} declares length {(z >> 1) ^ -(z & 1)} but "
                    f"{end - pos} bytes remain in the batch"
                )
            z = data[pos + 1]
            if z < 0x80:
                pos += 2
            elif data[pos + 2] < 0x80:
                z = (z & 0x7F) | (data[pos + 2] << 7)
                pos += 3
            else:
                z, pos = slow(data, pos + 1, 10)
            delta = (z >> 1) ^ -(z & 1)
            if lowest is None:
                lowest = highest = delta
            elif delta < lowest:
                lowest = delta
            elif delta > highest:  # type: ignore[operator]
                highest = delta
            z = data[pos]
            if z >= 0x80:
                z = (
                    (z & 0x7F) | (data[pos + 1] << 7)
                    if data[pos + 1] < 0x80
                    else slow(data, pos, 5)[0]
                )
            if z != index << 1:
                raise CorruptRecordError(
                    f"record {index} has offset delta {(z >> 1) ^ -(z & 1)}, not {index}"
                )
            pos = record_end
    except IndexError:
        raise CorruptRecordError("a record runs past the end of the batch") from None
    if pos != end:
        raise CorruptRecordError(
            f"the batch declares {count} records but {end - pos} bytes follow them"
        )
    return lowest, highest, None


def _walk_uniform(
    data: bytes | bytearray, pos: int, end: int, count: int
) -> tuple[int, int, None] | None:
    """``walk_lengths`` for a batch of 2 to ``_UNIFORM_MAX_RECORDS`` records of one length
    within each run of equal offset delta widths (records 0-63, 64-8191, 8192 on), as
    fixed-size keys and values give (fixed schemas, load generators, librdkafka's large
    batches); or None, which says nothing about the batch. Each run is a ``_uniform_run``;
    together they must end at ``end``."""
    if count < 2 or count > _UNIFORM_MAX_RECORDS:
        return None
    lows: list[int] = []
    highs: list[int] = []
    for width in (1, 2, 3):
        first = _OFFSET_WIDTH_STARTS[width - 1]
        if count <= first:
            break
        run = _uniform_run(data, pos, end, width, min(count, _OFFSET_WIDTH_STARTS[width]) - first)
        if run is None:
            return None
        pos, low, high = run
        lows.append(low)
        highs.append(high)
    if pos != end:
        return None
    return min(lows), max(highs), None


def _uniform_run(
    data: bytes | bytearray, pos: int, end: int, offset_width: int, n: int
) -> tuple[int, int, int] | None:
    """``n`` records from the first whose offset delta varint has ``offset_width`` bytes,
    from ``pos``, all as long as the first (its length in one or two varint bytes), checked
    without a per-record Python step: each record then starts at a multiple of that size,
    and a strided slice (one C-level copy) takes the same byte of every record. Each length
    varint must be the first's, each timestamp delta one byte, each offset delta varint the
    shortest encoding of its index: the checks the loop in ``walk_lengths`` makes (a length
    of at least 6 keeps every byte read inside its record).
    Returns (where the run ends, lowest and highest timestamp delta), or None."""
    if end - pos < 2:
        return None
    z = data[pos]
    if z < 0x80:
        width = 1
    else:
        high = data[pos + 1]
        if high >= 0x80:
            return None
        z = (z & 0x7F) | (high << 7)
        width = 2
    if z & 1 or z < 12:
        return None
    size = width + (z >> 1)
    run_end = pos + size * n
    if run_end > end:
        return None
    if data[pos:run_end:size] != data[pos : pos + 1] * n:
        return None
    if width == 2 and data[pos + 1 : run_end : size] != data[pos + 1 : pos + 2] * n:
        return None
    at = pos + width + 1  # the timestamp delta, after the attributes byte
    timestamps = data[at:run_end:size]
    if not timestamps.isascii():  # a timestamp delta of two bytes or more
        return None
    for k, expected in enumerate(_offset_bytes(offset_width)):
        if data[at + 1 + k : run_end : size] != expected[:n]:
            return None
    deltas = [_ZIGZAG_1[t] for t in set(timestamps)]
    return run_end, min(deltas), max(deltas)


def _walk_headers(data: bytes | bytearray, pos: int, record_end: int, index: int) -> int:
    """Skip a record's headers (count, then key and nullable value each), checking them."""
    z, pos = _varint(data, pos, 5)
    if z & 1:
        raise CorruptRecordError(f"record {index} has header count {-(z + 1) // 2}")
    slow = _varint
    for _ in range(z >> 1):
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            z, pos = slow(data, pos, 5)
        if z & 1:
            raise CorruptRecordError(f"record {index} has a header key of negative length")
        pos += z >> 1
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            z, pos = slow(data, pos, 5)
        if z != 1:
            if z & 1:
                raise CorruptRecordError(f"record {index} has a header value of negative length")
            pos += z >> 1
        if pos > record_end:
            raise CorruptRecordError(f"record {index}'s headers run past its end")
    return pos


def _varint(data: bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    """The raw (zig-zagged) varint at ``pos``, at most ``max_bytes`` long, and the position
    after it; int32 varints must fit 32 bits and varlongs 64."""
    z = 0
    shift = 0
    for i in range(pos, pos + max_bytes):
        byte = data[i]
        z |= (byte & 0x7F) << shift
        if byte < 0x80:
            if z >> (32 if max_bytes == 5 else 64):
                break
            return z, i + 1
        shift += 7
    raise CorruptRecordError(f"varint at byte {pos} is longer than {max_bytes} bytes or too big")
