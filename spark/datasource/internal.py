"""Rows for the two internal topics the analytics read.

- ``__consumer_offsets`` (format: ``brokernodes.groups.records``): offset commits become
  ``(group, topic, partition, committed_offset, leader_epoch, metadata, commit_timestamp,
  offset, timestamp, tenant)``; a tombstone has a null ``committed_offset``; group, member and
  assignment records are skipped. Under the control plane the coordinator keys groups as
  ``<tenant>/<group>``; the tenant is split off into its own column.
- ``__usage`` (format: ``brokernodes.server.usage``): one row per (tenant, principal, topic)
  and broker window.
"""

from __future__ import annotations

from datetime import UTC, datetime

from brokernodes.groups.records import OFFSET_COMMIT, decode_key, decode_value
from brokernodes.records.batch import DecodedRecord
from brokernodes.server.usage import USAGE_TOPIC, decode_usage
from spark.datasource.validity import timestamp_ok

CONSUMER_OFFSETS = "__consumer_offsets"
USAGE = USAGE_TOPIC


def _ts(ms: int | None) -> datetime | None:
    """A datetime, or None for a missing timestamp or one no report can hold."""
    if ms is None or not timestamp_ok(ms):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def split_group(qualified: str, tenant: str | None) -> tuple[str | None, str]:
    """(tenant, group): the option's tenant wins; else ``<tenant>/<group>`` is split."""
    if tenant is not None:
        return tenant, qualified
    t, sep, group = qualified.partition("/")
    return (t, group) if sep else (None, qualified)


def decode_offsets_row(r: DecodedRecord, tenant: str | None = None) -> tuple | None:
    if r.key is None:
        return None
    kind, fields = decode_key(r.key)
    if kind != OFFSET_COMMIT:
        return None
    qualified, topic, partition = fields
    t, group = split_group(str(qualified), tenant)
    if r.value is None:
        committed = epoch = metadata = commit_ts = None
    else:
        v = decode_value(r.value)
        committed = int(v["offset"])
        epoch = v.get("leader_epoch")
        metadata = str(v.get("metadata") or "")
        commit_ts = int(v.get("commit_timestamp_ms") or r.timestamp)
    return (
        group,
        str(topic),
        int(partition),
        committed,
        None if epoch is None else int(epoch),
        metadata,
        _ts(commit_ts),
        r.offset,
        _ts(r.timestamp),
        t,
    )


def decode_usage_row(r: DecodedRecord) -> tuple | None:
    if r.value is None:
        return None
    u = decode_usage(r.value)
    return (
        u.tenant,
        u.principal,
        u.topic,
        _ts(u.window_start_ms),
        _ts(u.window_end_ms),
        u.broker_id,
        u.bytes_in,
        u.bytes_out,
        u.records_in,
        u.records_out,
        u.requests,
        u.throttle_ms,
        r.offset,
    )
