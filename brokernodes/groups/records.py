"""The ``__consumer_offsets`` record format, and the loader a new coordinator runs on it.

Every record is a (key, value) pair for the compacted topic; a value of ``None`` is a
tombstone, which deletes the key (compaction later drops both). Keys are small binary
structures so that equal keys are equal bytes (compaction needs that); values are a version
followed by compact JSON, easy to read with ``kcat`` and to extend.

Key (big-endian, as Kafka's)::

    int16 record type            the key version in Kafka's vocabulary
    string group                 int16 length + UTF-8
    ... type-specific fields:
      1  OFFSET_COMMIT            string topic, int32 partition
      2  CLASSIC_GROUP            (none)
      3  GROUP_METADATA           (none)
      5  MEMBER_METADATA          string member_id
      6  TARGET_ASSIGNMENT        string member_id

Value::

    int16 value version (0)      then UTF-8 JSON, keys sorted, no spaces:
      OFFSET_COMMIT      {"offset", "leader_epoch", "metadata", "commit_timestamp_ms"}
      CLASSIC_GROUP      {"protocol_type", "generation", "protocol", "leader", "members":
                          [{"member_id", "instance_id", "client_id", "client_host",
                            "session_timeout_ms", "rebalance_timeout_ms",
                            "subscription" (base64), "assignment" (base64)}]}
      GROUP_METADATA     {"epoch", "assignment_epoch", "assignor", "session_timeout_ms",
                          "rebalance_timeout_ms", "heartbeat_interval_ms", "partition_counts"}
      MEMBER_METADATA    {"instance_id", "subscriptions", "member_epoch",
                          "previous_member_epoch", "state", "assigned", "revoking",
                          "session_timeout_ms", "rebalance_timeout_ms", "left"}
      TARGET_ASSIGNMENT  {"partitions": [[topic, partition], ...]}

The type numbers follow Kafka's (offset commit 1, classic group metadata 2, consumer group
metadata 3, member metadata 5, target assignment member 6). A classic group is one record with
its members inline, as Kafka's GroupMetadata value, holding its last completed generation
(``ClassicGroup.persisted``). Sluice folds Kafka's separate current-member-assignment record
(8) into the member record. A group is written as the snapshot :func:`group_records` gives;
:func:`record_diff` turns two snapshots into the upserts and tombstones to append.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from brokernodes.errors import CorruptRecordError
from brokernodes.groups.classic import ClassicConfig, ClassicGroup
from brokernodes.groups.group import ConsumerGroup, Member, MemberState
from brokernodes.groups.types import OffsetAndMetadata, OffsetKey, TopicPartition

__all__ = [
    "CLASSIC_GROUP",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "OFFSET_COMMIT",
    "TARGET_ASSIGNMENT",
    "CoordinatorState",
    "decode_key",
    "encode_offset_commit",
    "encode_offset_key",
    "group_records",
    "group_tombstones",
    "load_records",
    "record_diff",
]

OFFSET_COMMIT = 1
CLASSIC_GROUP = 2
GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT = 6
VALUE_VERSION = 0

Record = tuple[bytes, bytes | None]


# --- encoding ---------------------------------------------------------------------------


def _str(s: str) -> bytes:
    raw = s.encode()
    if len(raw) > 0x7FFF:
        raise ValueError("string too long for a __consumer_offsets key")
    return struct.pack(">h", len(raw)) + raw


def _key(kind: int, group: str, *rest: bytes) -> bytes:
    return struct.pack(">h", kind) + _str(group) + b"".join(rest)


def _value(obj: Mapping[str, object]) -> bytes:
    body = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return struct.pack(">h", VALUE_VERSION) + body.encode()


def encode_offset_key(key: OffsetKey) -> bytes:
    return _key(OFFSET_COMMIT, key.group, _str(key.topic), struct.pack(">i", key.partition))


def encode_offset_commit(key: OffsetKey, om: OffsetAndMetadata) -> Record:
    value = _value(
        {
            "offset": om.offset,
            "leader_epoch": om.leader_epoch,
            "metadata": om.metadata,
            "commit_timestamp_ms": om.commit_timestamp_ms,
        }
    )
    return encode_offset_key(key), value


def _tps(tps: Iterable[TopicPartition]) -> list[list[object]]:
    return [[t, p] for t, p in sorted(tps)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def classic_group_records(group: ClassicGroup) -> dict[bytes, bytes]:
    """A classic group's one record (its last completed generation), or none yet."""
    doc = group.persisted()
    if doc is None:
        return {}
    value = dict(doc)
    value["members"] = [
        {**m, "subscription": _b64(m["subscription"]), "assignment": _b64(m["assignment"])}
        for m in doc["members"]
    ]
    return {_key(CLASSIC_GROUP, group.group_id): _value(value)}


def group_records(group: ConsumerGroup | ClassicGroup) -> dict[bytes, bytes]:
    """The group's metadata, members and target assignment as records (a snapshot)."""
    if isinstance(group, ClassicGroup):
        return classic_group_records(group)
    gid = group.group_id
    out = {
        _key(GROUP_METADATA, gid): _value(
            {
                "epoch": group.group_epoch,
                "assignment_epoch": group.target_assignment_epoch,
                "assignor": group.assignor,
                "session_timeout_ms": group.session_timeout_ms,
                "rebalance_timeout_ms": group.rebalance_timeout_ms,
                "heartbeat_interval_ms": group.heartbeat_interval_ms,
                "partition_counts": dict(sorted(group.partition_counts.items())),
            }
        )
    }
    for m in group.members.values():
        out[_key(MEMBER_METADATA, gid, _str(m.member_id))] = _value(
            {
                "instance_id": m.instance_id,
                "subscriptions": sorted(m.subscriptions),
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": m.state.value,
                "assigned": _tps(m.assigned),
                "revoking": _tps(m.revoking),
                "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "left": m.left,
            }
        )
    for mid, tps in group.target.items():
        out[_key(TARGET_ASSIGNMENT, gid, _str(mid))] = _value({"partitions": _tps(tps)})
    return out


def group_tombstones(group: ConsumerGroup | ClassicGroup) -> list[Record]:
    """Tombstones for every group record (a group delete); offsets are deleted separately."""
    return [(k, None) for k in sorted(group_records(group))]


def record_diff(before: Mapping[bytes, bytes], after: Mapping[bytes, bytes]) -> list[Record]:
    """What to append to go from snapshot ``before`` to ``after``: changed or new keys with
    their values, and a tombstone for every key that disappeared."""
    out: list[Record] = [(k, v) for k, v in sorted(after.items()) if before.get(k) != v]
    out += [(k, None) for k in sorted(before) if k not in after]
    return out


# --- decoding ---------------------------------------------------------------------------


def _read_str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    if n < 0 or pos + 2 + n > len(buf):
        raise CorruptRecordError("truncated string in a __consumer_offsets key")
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def decode_key(key: bytes) -> tuple[int, tuple[object, ...]]:
    """``(record type, fields)``: (group, topic, partition), (group,), (group, member_id)."""
    try:
        (kind,) = struct.unpack_from(">h", key, 0)
        group, pos = _read_str(key, 2)
        if kind == OFFSET_COMMIT:
            topic, pos = _read_str(key, pos)
            (partition,) = struct.unpack_from(">i", key, pos)
            fields, pos = (group, topic, partition), pos + 4
        elif kind in (GROUP_METADATA, CLASSIC_GROUP):
            fields = (group,)
        elif kind in (MEMBER_METADATA, TARGET_ASSIGNMENT):
            member_id, pos = _read_str(key, pos)
            fields = (group, member_id)
        else:
            raise CorruptRecordError(f"unknown __consumer_offsets record type {kind}")
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed __consumer_offsets key: {exc}") from None
    if pos != len(key):
        raise CorruptRecordError("trailing bytes in a __consumer_offsets key")
    return kind, fields


def decode_value(value: bytes) -> dict[str, object]:
    try:
        (version,) = struct.unpack_from(">h", value, 0)
        if version != VALUE_VERSION:
            raise CorruptRecordError(f"unknown __consumer_offsets value version {version}")
        obj = json.loads(value[2:].decode())
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecordError(f"malformed __consumer_offsets value: {exc}") from None
    if not isinstance(obj, dict):
        raise CorruptRecordError("a __consumer_offsets value must be a JSON object")
    return obj


@dataclass
class CoordinatorState:
    """What a coordinator rebuilds from its ``__consumer_offsets`` partition."""

    offsets: dict[OffsetKey, OffsetAndMetadata] = field(default_factory=dict)
    groups: dict[str, ConsumerGroup | ClassicGroup] = field(default_factory=dict)


def load_records(
    records: Iterable[Record],
    now_ms: int,
    *,
    member_id_factory: Callable[[], str] | None = None,
    classic_config: ClassicConfig | None = None,
) -> CoordinatorState:
    """Replay records in log order (last write wins, tombstones delete) and rebuild the
    committed offsets and the groups. Members get a fresh session (deadline ``now_ms`` +
    session timeout), as after a Kafka coordinator failover, so a failover fences nobody."""
    latest: dict[bytes, bytes] = {}
    for key, value in records:
        decode_key(key)  # refuse garbage early
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = value
    state = CoordinatorState()
    members: dict[str, dict[str, dict[str, object]]] = {}
    targets: dict[str, dict[str, frozenset[TopicPartition]]] = {}
    classic: dict[str, dict[str, object]] = {}
    for key, value in latest.items():
        kind, f = decode_key(key)
        v = decode_value(value)
        if kind == OFFSET_COMMIT:
            state.offsets[OffsetKey(*f)] = OffsetAndMetadata(
                offset=int(v["offset"]),
                leader_epoch=v.get("leader_epoch"),
                metadata=str(v.get("metadata", "")),
                commit_timestamp_ms=int(v.get("commit_timestamp_ms", 0)),
            )
        elif kind == GROUP_METADATA:
            kwargs = {} if member_id_factory is None else {"member_id_factory": member_id_factory}
            state.groups[str(f[0])] = ConsumerGroup(
                group_id=str(f[0]),
                assignor=str(v["assignor"]),
                session_timeout_ms=int(v["session_timeout_ms"]),
                rebalance_timeout_ms=int(v["rebalance_timeout_ms"]),
                heartbeat_interval_ms=int(v["heartbeat_interval_ms"]),
                partition_counts=dict(v["partition_counts"]),
                group_epoch=int(v["epoch"]),
                target_assignment_epoch=int(v["assignment_epoch"]),
                **kwargs,
            )
        elif kind == CLASSIC_GROUP:
            classic[str(f[0])] = v
        elif kind == MEMBER_METADATA:
            members.setdefault(str(f[0]), {})[str(f[1])] = v
        else:
            parts = frozenset(TopicPartition(t, p) for t, p in v["partitions"])
            targets.setdefault(str(f[0]), {})[str(f[1])] = parts
    for gid, doc in classic.items():
        if gid in state.groups:  # both kinds of record: the consumer group's came later
            continue
        state.groups[gid] = _restore_classic(gid, doc, now_ms, classic_config)
    for gid, group in state.groups.items():
        if isinstance(group, ClassicGroup):
            continue
        for mid, v in members.get(gid, {}).items():
            member = Member(
                member_id=mid,
                subscriptions=frozenset(v["subscriptions"]),
                instance_id=v["instance_id"],
                member_epoch=int(v["member_epoch"]),
                previous_member_epoch=int(v["previous_member_epoch"]),
                state=MemberState(v["state"]),
                assigned=frozenset(TopicPartition(t, p) for t, p in v["assigned"]),
                revoking=frozenset(TopicPartition(t, p) for t, p in v["revoking"]),
                session_timeout_ms=int(v["session_timeout_ms"]),
                rebalance_timeout_ms=int(v["rebalance_timeout_ms"]),
                left=bool(v["left"]),
            )
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            if member.revoking:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            group.members[mid] = member
            for tp in member.holds:
                group.owners[tp] = mid
        group.target = {
            mid: tps for mid, tps in targets.get(gid, {}).items() if mid in group.members
        }
    return state


def _restore_classic(
    gid: str, doc: dict, now_ms: int, config: ClassicConfig | None
) -> ClassicGroup:
    try:
        members = [
            {
                **m,
                "subscription": base64.b64decode(m["subscription"], validate=True),
                "assignment": base64.b64decode(m["assignment"], validate=True),
            }
            for m in doc.get("members") or []
        ]
        return ClassicGroup.restore(gid, {**doc, "members": members}, now_ms, config)
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecordError(f"malformed classic group record for {gid!r}: {exc}") from None
