"""Hypothesis strategies shared by the record codec tests."""

from __future__ import annotations

from hypothesis import strategies as st

from brokernodes.records.batch import Record
from brokernodes.records.compression import Compression

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
codecs = st.sampled_from(list(Compression))
payloads = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=40)), max_size=4)
# -1 is "no timestamp"; Kafka refuses other negatives. Large values exercise long varlongs.
timestamps = st.integers(-1, 1 << 62) | st.integers(1_600_000_000_000, 1_800_000_000_000)


@st.composite
def record_lists(draw, min_size: int = 0, max_size: int = 30, gaps: bool = True) -> list[Record]:
    """Records with random keys, values, headers, timestamps and (optionally) offset gaps."""
    n = draw(st.integers(min_size, max_size))
    records = []
    delta = -1
    for _ in range(n):
        explicit = gaps and draw(st.booleans())
        if explicit:
            delta += draw(st.integers(1, 20_000))
        else:
            delta += 1
        records.append(
            Record(
                draw(timestamps),
                draw(payloads),
                draw(payloads),
                draw(headers),
                delta if explicit else None,
            )
        )
    return records
