"""The ``__transaction_state`` record format: one record per change of a transactional id,
keyed by the (qualified) id so compaction keeps the latest. The key is a version (int16, 0)
and the id in UTF-8; the value a JSON object (version 1). A coordinator rebuilds its
transactions with ``load``: the last value of each key wins, a tombstone forgets the id."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable

from brokernodes.transactions.state import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 1
_VERSION = struct.Struct(">h")


class CorruptTxnRecordError(ValueError):
    pass


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + transactional_id.encode()


def decode_key(key: bytes) -> str:
    if len(key) < 2 or _VERSION.unpack_from(key)[0] != KEY_VERSION:
        raise CorruptTxnRecordError("unknown __transaction_state key version")
    return key[2:].decode()


def encode_value(meta: TxnMetadata) -> bytes:
    return json.dumps(
        {
            "v": VALUE_VERSION,
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "timeout_ms": meta.timeout_ms,
            "state": meta.state.value,
            "partitions": sorted([t, p] for t, p in meta.partitions),
            "start_ms": meta.start_ms,
            "last_update_ms": meta.last_update_ms,
        },
        separators=(",", ":"),
    ).encode()


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        d = json.loads(value)
        if d.get("v") != VALUE_VERSION:
            raise CorruptTxnRecordError(f"unknown __transaction_state value version {d.get('v')}")
        return TxnMetadata(
            transactional_id,
            int(d["producer_id"]),
            int(d["producer_epoch"]),
            int(d["timeout_ms"]),
            TxnState(d["state"]),
            frozenset((str(t), int(p)) for t, p in d["partitions"]),
            int(d["start_ms"]),
            int(d["last_update_ms"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptTxnRecordError(f"malformed __transaction_state value: {e}") from None


def load(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TxnMetadata]:
    """The transactions a partition's records describe, in log order."""
    out: dict[str, TxnMetadata] = {}
    for key, value in records:
        tid = decode_key(key)
        if value is None:
            out.pop(tid, None)
        else:
            out[tid] = decode_value(tid, value)
    return out
